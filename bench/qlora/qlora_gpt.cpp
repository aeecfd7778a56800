// mantissa side of the QLoRA benchmark: LoRA fine-tuning steps of a GPT whose Linear layers are
// quantized by the bitsandbytes plugin (nf4-dq by default), with Adam on the adapters only.
// The model is built inside the plugin's init scope, so its full-precision weights never all
// exist at once. Prints one JSON line: median step seconds over the timed steps and the peak
// RSS (getrusage), like bench/qlora/torch_lora_gpt.py does for PyTorch + peft.
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mantissa/core/allocator.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/optim/adam.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "ops/attention_fused.h"

using namespace mantissa;

namespace {

// The GPT of models/gpt.cpp (GPT-2 layout, the same initialisation and the same fused causal
// attention), written so that forward calls whatever module is in each slot: the plugin and
// LoRA replace the Linear layers in place.
std::shared_ptr<nn::Module> slot(const nn::Module& m, const std::string& name) {
  for (const auto& [n, child] : m.child_slots())
    if (n == name) return child;
  std::abort();
}

class Block : public nn::Module {
 public:
  Block(int64_t width, int64_t heads, int64_t layers) : Module("Block"), heads_(heads) {
    const double resid = 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
    register_module("ln1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width}));
    // The fused qkv projection is a Linear (as models::GPT's attn.in_proj and GPT-2's c_attn),
    // so the plugin quantizes it and LoRA adapts it like the other three.
    auto in_proj = register_module("in_proj", std::make_shared<nn::Linear>(width, 3 * width));
    auto out_proj = register_module("out_proj", std::make_shared<nn::Linear>(width, width));
    register_module("ln2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width}));
    auto fc1 = register_module("fc1", std::make_shared<nn::Linear>(width, 4 * width));
    auto fc2 = register_module("fc2", std::make_shared<nn::Linear>(4 * width, width));
    const std::pair<std::shared_ptr<nn::Linear>, double> inits[] = {
        {in_proj, 0.02}, {out_proj, resid}, {fc1, 0.02}, {fc2, resid}};
    for (const auto& [l, stddev] : inits) {
      nn::init::normal_(l->weight, 0.0, stddev);
      nn::init::zeros_(l->bias);
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor qkv = slot(*this, "in_proj")->forward(slot(*this, "ln1")->forward(x));
    Tensor a = detail::packed_self_attention(qkv, heads_, /*is_causal=*/true);
    Tensor y = add(x, slot(*this, "out_proj")->forward(a));
    Tensor h =
        nn::functional::gelu(slot(*this, "fc1")->forward(slot(*this, "ln2")->forward(y)), "tanh");
    return add(y, slot(*this, "fc2")->forward(h));
  }

 private:
  int64_t heads_;
};

class BenchGPT : public nn::Module {
 public:
  BenchGPT(int64_t vocab, int64_t context, int64_t layers, int64_t width, int64_t heads,
           bool activation_checkpointing)
      : Module("GPT"), layers_(layers), activation_checkpointing_(activation_checkpointing) {
    wte = register_module("wte",
                          std::make_shared<nn::Embedding>(vocab, width, kFloat32, nullptr, 0.02));
    register_module("wpe",
                    std::make_shared<nn::Embedding>(context, width, kFloat32, nullptr, 0.02));
    for (int64_t i = 0; i < layers; ++i)
      register_module("h" + std::to_string(i), std::make_shared<Block>(width, heads, layers));
    register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width}));
  }
  Tensor forward(const Tensor& tokens) override {
    Tensor x = add(wte->forward(tokens), slot(*this, "wpe")->forward(arange(tokens.size(1))));
    for (int64_t i = 0; i < layers_; ++i) {
      nn::Module& block = *slot(*this, "h" + std::to_string(i));
      x = activation_checkpointing_ ? nn::checkpoint(block, x) : block.forward(x);
    }
    x = slot(*this, "ln_f")->forward(x);
    return matmul(x, wte->weight.t());
  }
  std::shared_ptr<nn::Embedding> wte;

 private:
  int64_t layers_;
  bool activation_checkpointing_;
};

struct Args {
  int64_t layers = 12, width = 768, heads = 12, vocab = 256, context = 256, batch = 4;
  int64_t steps = 8, warmup = 2, lora_rank = 16;
  double lora_alpha = 32, lr = 1e-4;
  int threads = 2;
  bool activation_checkpointing = false;  // --activation-checkpointing 1: nn::checkpoint per block
  std::string precision = "nf4-dq", dtype = "bf16", optimizer = "adam";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--layers")
      a.layers = std::stoll(v);
    else if (k == "--width")
      a.width = std::stoll(v);
    else if (k == "--heads")
      a.heads = std::stoll(v);
    else if (k == "--vocab")
      a.vocab = std::stoll(v);
    else if (k == "--context")
      a.context = std::stoll(v);
    else if (k == "--batch")
      a.batch = std::stoll(v);
    else if (k == "--steps")
      a.steps = std::stoll(v);
    else if (k == "--warmup")
      a.warmup = std::stoll(v);
    else if (k == "--lora-rank")
      a.lora_rank = std::stoll(v);
    else if (k == "--lora-alpha")
      a.lora_alpha = std::stod(v);
    else if (k == "--lr")
      a.lr = std::stod(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--precision")
      a.precision = v;
    else if (k == "--dtype")
      a.dtype = v;
    else if (k == "--optimizer")
      a.optimizer = v;
    else if (k == "--activation-checkpointing")
      a.activation_checkpointing = v == "1";
    else {
      fmt::print(stderr, "qlora_gpt: unknown option {}\n", k);
      std::exit(2);
    }
  }
  return a;
}

DType dtype_from(const std::string& s) {
  if (s == "bf16") return kBFloat16;
  if (s == "fp16") return kFloat16;
  if (s == "fp32") return kFloat32;
  fmt::print(stderr, "qlora_gpt: --dtype must be bf16, fp16 or fp32\n");
  std::exit(2);
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  omp_set_num_threads(a.threads);
  train::BitsandbytesPrecision plugin(a.precision, dtype_from(a.dtype));
  manual_seed(0);
  std::shared_ptr<BenchGPT> model;
  {
    train::ScopePtr scope = plugin.module_init_context();
    model = std::make_shared<BenchGPT>(a.vocab, a.context, a.layers, a.width, a.heads,
                                       a.activation_checkpointing);
  }
  plugin.convert_module(*model);
  const int64_t rss_after_build = peak_rss_bytes();
  nn::apply_lora(*model, {.r = a.lora_rank, .alpha = a.lora_alpha});
  nn::mark_only_lora_as_trainable(*model, nn::LoraBias::kNone);
  std::vector<Tensor> trainable;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (a.optimizer == "adam8bit") {
    optim::Adam8bitOptions o;
    o.lr = a.lr;
    optimizer = std::make_unique<optim::Adam8bit>(trainable, o);
  } else if (a.optimizer == "adam") {
    optim::AdamOptions adam;
    adam.lr = a.lr;
    optimizer = std::make_unique<optim::Adam>(trainable, adam);
  } else {
    fmt::print(stderr, "qlora_gpt: --optimizer must be adam or adam8bit\n");
    return 2;
  }

  Generator gen(1);
  std::vector<double> times, losses;
  for (int64_t step = 0; step < a.warmup + a.steps; ++step) {
    std::vector<int64_t> ids(static_cast<size_t>(a.batch * (a.context + 1)));
    for (int64_t& id : ids) id = std::min<int64_t>(a.vocab - 1, gen.uniform() * a.vocab);
    const Tensor tokens = tensor(ids, {a.batch, a.context + 1});
    const Tensor x = tokens.narrow(1, 0, a.context).contiguous();
    const Tensor y = tokens.narrow(1, 1, a.context).contiguous();
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss;
    {
      train::ScopePtr fwd = plugin.forward_context();
      Tensor logits = model->forward(x);
      loss = cross_entropy(logits.reshape({-1, a.vocab}).to(kFloat32), y.reshape({-1}));
    }
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    losses.push_back(loss.item());
    if (step >= a.warmup) times.push_back(dt);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      sorted.empty()
          ? 0
          : (sorted.size() % 2 ? sorted[sorted.size() / 2]
                               : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]));
  const train::QuantizedStats q = train::BitsandbytesPrecision::quantized_stats(*model);
  nlohmann::json out = {
      {"framework",
       fmt::format("mantissa {} ({} compute) + LoRA, {}{}", a.precision, a.dtype, a.optimizer,
                   a.activation_checkpointing ? ", activation checkpointing" : "")},
      {"parameters", model->parameter_count() + q.weight_numel},
      {"quantized_layers", q.layers},
      {"quantized_bits_per_parameter", q.bits_per_parameter()},
      {"trainable_parameters", nn::trainable_parameter_count(*model)},
      {"median_step_seconds", median},
      {"step_seconds", times},
      {"tokens_per_step", a.batch * a.context},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"peak_rss_after_build_bytes", rss_after_build},
      {"first_loss", losses.front()},
      {"last_loss", losses.back()}};
  fmt::print("{}\n", out.dump());
  return 0;
}
