// mantissa side of the Hugging Face benchmark (bench/hf/run.sh): a transformers model directory
// loaded by models::load_hf_model, measured three ways, one JSON line on stdout each:
//
//   hf_bench qlora    DIR [options]  QLoRA steps: nf4-dq base (compute dtype --dtype), LoRA on
//                                    the seven Llama projections, 8-bit AdamW on the adapters
//   hf_bench generate DIR [options]  greedy KV-cache generation, --weights bf16, nf4 (nf4-dq),
//                                    nf4-dq, fp4, fp4-dq or int8, loaded as `mantissa generate
//                                    --precision` loads them
//   hf_bench load     DIR [options]  one nf4-dq load: peak RSS against the loader's bound
//
// Timed work repeats until at least --steps repetitions and --min-seconds have passed, after
// --warmup untimed ones, so every round lasts long enough to time on a busy machine. Peak RSS
// is getrusage's ru_maxrss of the whole process, as bench/qlora/qlora_gpt.cpp reports it.
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mantissa/core/allocator.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/models/generate.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/nn/lora.h"
#include "mantissa/ops/loss.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

using namespace mantissa;

namespace {

struct Args {
  std::string mode, dir;
  int64_t batch = 4, seq = 256, steps = 2, warmup = 1, lora_rank = 16;
  double lora_alpha = 32, lr = 1e-4, min_seconds = 2.0;
  int64_t prompt = 32, new_tokens = 64;
  int threads = 2;
  std::string dtype = "bf16";             // qlora: compute dtype of the quantized layers
  std::string weights = "bf16";           // generate: bf16 (bf16-true) or a quantized precision
  std::string rest_dtype = "fp32";        // load: dtype of the layers left unquantized
  bool activation_checkpointing = false;  // qlora: nn::checkpoint per decoder layer
  bool profile = false;  // time the ops of the timed runs (the CLI's --profiler simple)
};

[[noreturn]] void usage(const std::string& why) {
  fmt::print(stderr,
             "hf_bench: {}\nusage: hf_bench qlora|generate|load MODEL_DIR [--batch N --seq N "
             "--steps N --warmup N --min-seconds S --threads N --lora-rank N --lora-alpha A "
             "--dtype bf16|fp32 --weights bf16|nf4 --prompt N --new-tokens N --rest-dtype "
             "fp32|bf16 --profile 0|1 --activation-checkpointing 0|1]\n",
             why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 3) usage("needs a mode and a model directory");
  Args a;
  a.mode = argv[1];
  a.dir = argv[2];
  if (a.mode != "qlora" && a.mode != "generate" && a.mode != "load")
    usage("unknown mode '" + a.mode + "'");
  for (int i = 3; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(k + " needs a value");
    const std::string v = argv[i + 1];
    if (k == "--batch")
      a.batch = std::stoll(v);
    else if (k == "--seq")
      a.seq = std::stoll(v);
    else if (k == "--steps")
      a.steps = std::stoll(v);
    else if (k == "--warmup")
      a.warmup = std::stoll(v);
    else if (k == "--min-seconds")
      a.min_seconds = std::stod(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--lora-rank")
      a.lora_rank = std::stoll(v);
    else if (k == "--lora-alpha")
      a.lora_alpha = std::stod(v);
    else if (k == "--lr")
      a.lr = std::stod(v);
    else if (k == "--dtype")
      a.dtype = v;
    else if (k == "--weights")
      a.weights = v;
    else if (k == "--prompt")
      a.prompt = std::stoll(v);
    else if (k == "--new-tokens")
      a.new_tokens = std::stoll(v);
    else if (k == "--rest-dtype")
      a.rest_dtype = v;
    else if (k == "--activation-checkpointing")
      a.activation_checkpointing = v == "1";
    else if (k == "--profile")
      a.profile = v == "1";
    else
      usage("unknown option " + k);
  }
  return a;
}

DType dtype_from(const std::string& s) {
  if (s == "bf16") return kBFloat16;
  if (s == "fp32") return kFloat32;
  usage("a dtype must be bf16 or fp32, got '" + s + "'");
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Runs `work` `warmup` times untimed, then until `steps` runs and `min_seconds` have passed.
template <class F>
std::vector<double> timed_runs(const Args& a, F&& work) {
  for (int64_t i = 0; i < a.warmup; ++i) work();
  if (a.profile) {
    profiling::reset_op_times();
    profiling::set_op_timing(true);
  }
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int64_t>(times.size()) < a.steps || seconds_since(start) < a.min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    times.push_back(seconds_since(t0));
  }
  profiling::set_op_timing(false);
  return times;
}

// Bytes held by the model's parameters and buffers (each tensor once).
int64_t model_bytes(const nn::Module& model) {
  int64_t total = 0;
  for (const Tensor& t : model.parameters()) total += static_cast<int64_t>(t.nbytes());
  for (const Tensor& t : model.buffers()) total += static_cast<int64_t>(t.nbytes());
  return total;
}

// Random token ids in [0, vocab) from `gen`, shaped (rows, cols).
Tensor random_tokens(Generator& gen, int64_t vocab, int64_t rows, int64_t cols) {
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols));
  for (int64_t& id : ids)
    id = std::min<int64_t>(vocab - 1, static_cast<int64_t>(gen.uniform() * vocab));
  return tensor(ids, {rows, cols});
}

// With --profile 1: seconds per op family over the timed steps, largest first ("forward
// linear": 12.3), as the CLI's simple profiler groups them.
nlohmann::json op_breakdown(const Args& a) {
  nlohmann::json out = nlohmann::json::array();
  if (!a.profile) return out;
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [key, t] : profiling::op_times())
    rows.emplace_back(t.seconds, key.first + " " + key.second);
  std::sort(rows.rbegin(), rows.rend());
  for (const auto& [seconds, name] : rows) out.push_back({name, seconds});
  return out;
}

nlohmann::json run_qlora(const Args& a) {
  const DType compute = dtype_from(a.dtype);
  // The plugin's forward context is the autocast QLoRA runs under (none for fp32 compute); the
  // loader quantizes with the same plugin code as the weights are read.
  train::BitsandbytesPrecision plugin("nf4-dq", compute);
  auto model =
      models::load_hf_model(a.dir, {.quantization = "nf4-dq", .quant_compute_dtype = compute});
  model->train();  // the loader returns it in eval mode, as from_pretrained does
  model->set_activation_checkpointing(a.activation_checkpointing);
  const int64_t rss_after_load = peak_rss_bytes();
  const std::vector<std::string> targets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                            "gate_proj", "up_proj", "down_proj"};
  const std::vector<std::string> wrapped =
      nn::apply_lora(*model, {.r = a.lora_rank, .alpha = a.lora_alpha, .target_modules = targets});
  // As peft: only the adapters train; embeddings and norms stay frozen.
  nn::mark_only_lora_as_trainable(*model, nn::LoraBias::kNone);
  std::vector<Tensor> trainable;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  optim::Adam8bitOptions o = optim::adamw8bit_defaults();
  o.lr = a.lr;
  optim::AdamW8bit optimizer(trainable, o);

  const int64_t vocab = model->config().vocab_size;
  Generator gen(1);
  std::vector<double> losses;
  const std::vector<double> times = timed_runs(a, [&] {
    const Tensor tokens = random_tokens(gen, vocab, a.batch, a.seq + 1);
    const Tensor x = tokens.narrow(1, 0, a.seq).contiguous();
    const Tensor y = tokens.narrow(1, 1, a.seq).contiguous();
    Tensor loss;
    {
      train::ScopePtr fwd = plugin.forward_context();
      Tensor logits = model->forward(x);
      // The loss in fp32 as transformers takes it (logits.float()): autocast's fp32 policy for
      // cross_entropy, which reads bf16 logits without an fp32 copy (src/ops/loss.cpp).
      loss = cross_entropy(logits.reshape({-1, vocab}), y.reshape({-1}));
    }
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item());
  });
  return {
      {"framework", fmt::format("mantissa nf4-dq ({} compute) + LoRA, AdamW8bit{}", a.dtype,
                                a.activation_checkpointing ? ", activation checkpointing" : "")},
      {"simd", simd_level_name(simd_level())},
      {"adapted_layers", wrapped.size()},
      {"trainable_parameters", nn::trainable_parameter_count(*model)},
      {"step_seconds", times},
      {"median_step_seconds", median_of(times)},
      {"tokens_per_step", a.batch * a.seq},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"peak_rss_after_load_bytes", rss_after_load},
      // The allocator's high-water mark of live tensor bytes (RSS adds its block cache, the
      // code and the libraries).
      {"peak_tensor_bytes", max_memory_allocated()},
      {"first_loss", losses.front()},
      {"last_loss", losses.back()},
      {"op_seconds", op_breakdown(a)}};
}

nlohmann::json run_generate(const Args& a) {
  // "nf4" stays the name of nf4-dq (the sides of earlier results files).
  const std::string quantization = a.weights == "nf4" ? "nf4-dq" : a.weights;
  const bool quantized = a.weights != "bf16";
  if (quantized && quantization != "nf4-dq" && quantization != "nf4" && quantization != "fp4" &&
      quantization != "fp4-dq" && quantization != "int8")
    usage("--weights must be bf16, nf4, nf4-dq, fp4, fp4-dq or int8");
  // As `mantissa generate --precision` loads (recipes/generate_run.cpp): bf16: every parameter
  // in bf16 (bf16-true); quantized: the projections quantized at load, computing in the
  // plugin's default dtype, the rest fp32, no autocast.
  models::HfLoadOptions load;
  if (quantized)
    load.quantization = quantization;
  else
    load.dtype = kBFloat16;
  auto model = models::load_hf_model(a.dir, load);
  Generator gen(2);
  const Tensor prompt_tensor = random_tokens(gen, model->config().vocab_size, 1, a.prompt);
  const std::vector<int64_t> prompt = prompt_tensor.to_vector<int64_t>();
  models::GenerateOptions o{.max_new_tokens = a.new_tokens};  // greedy, no end token
  std::vector<int64_t> out;
  const std::vector<double> times =
      timed_runs(a, [&] { out = models::generate(*model, prompt, o); });
  std::vector<double> tokens_per_second;
  for (double t : times) tokens_per_second.push_back(static_cast<double>(out.size()) / t);
  return {{"framework",
           fmt::format("mantissa generate, {} weights", quantized ? quantization : "bf16")},
          {"simd", simd_level_name(simd_level())},
          {"prompt_tokens", a.prompt},
          {"new_tokens", out.size()},
          {"call_seconds", times},
          {"tokens_per_second", tokens_per_second},
          {"median_tokens_per_second", median_of(tokens_per_second)},
          {"first_tokens",
           std::vector<int64_t>(out.begin(), out.begin() + std::min<size_t>(8, out.size()))},
          {"peak_rss_bytes", peak_rss_bytes()},
          {"op_seconds", op_breakdown(a)}};
}

nlohmann::json run_load(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  auto model =
      models::load_hf_model(a.dir, {.dtype = dtype_from(a.rest_dtype), .quantization = "nf4-dq"});
  const double seconds = seconds_since(t0);
  const int64_t peak = peak_rss_bytes();
  // The largest tensor of the file, as the loader holds it in fp32 before quantizing or
  // converting it: the embedding or the head (vocab x hidden) or an MLP projection.
  const models::HfConfig& c = model->config();
  const int64_t largest =
      4 * std::max({c.vocab_size * c.hidden_size, c.intermediate_size * c.hidden_size,
                    c.num_attention_heads * c.head_dim * c.hidden_size});
  const train::QuantizedStats q = train::BitsandbytesPrecision::quantized_stats(*model);
  const int64_t bytes = model_bytes(*model);
  return {{"framework", fmt::format("mantissa load_hf_model nf4-dq (rest {})", a.rest_dtype)},
          {"load_seconds", seconds},
          {"model_bytes", bytes},
          {"largest_tensor_fp32_bytes", largest},
          {"bound_bytes", static_cast<int64_t>(1.1 * static_cast<double>(bytes + largest))},
          {"quantized_layers", q.layers},
          {"quantized_bits_per_parameter", q.bits_per_parameter()},
          {"peak_rss_bytes", peak}};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  omp_set_num_threads(a.threads);
  try {
    const nlohmann::json out = a.mode == "qlora"      ? run_qlora(a)
                               : a.mode == "generate" ? run_generate(a)
                                                      : run_load(a);
    fmt::print("{}\n", out.dump());
  } catch (const std::exception& e) {
    fmt::print(stderr, "hf_bench {}: {}\n", a.mode, e.what());
    return 1;
  }
  return 0;
}
