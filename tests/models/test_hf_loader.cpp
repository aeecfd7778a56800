// hf_loader: state-dict keys equal the files', dtypes (bf16 without widening), quantized loads
// (bytes equal to the quantizer's), peak memory while loading, and every refusal by name.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/allocator_cache.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/models/generate.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/models/hf_weights.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"
#include "mantissa/quant/quantize.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

namespace fs = std::filesystem;
using models::load_hf_model;
using nlohmann::json;
using testing::hf_fixture_dir;
using testing::hf_reference;

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> b(c.nbytes());
  if (!b.empty()) std::memcpy(b.data(), c.data_ptr(), b.size());
  return b;
}

// Every tensor of a model directory's files, by name.
std::map<std::string, Tensor> file_tensors(const std::string& dir) {
  std::map<std::string, Tensor> out;
  const models::HfWeights w(dir);
  for (const std::string& n : w.names()) out[n] = w.file_of(n).read(n);
  return out;
}

TEST(HfLoader, StateDictKeysEqualTheFileKeys) {
  for (const std::string& name : testing::hf_fixture_names()) {
    auto model = load_hf_model(hf_fixture_dir(name));
    const auto files = file_tensors(hf_fixture_dir(name));
    std::set<std::string> file_keys, model_keys;
    for (const auto& [k, t] : files) file_keys.insert(k);
    for (const auto& [k, t] : model->state_dict()) model_keys.insert(k);
    EXPECT_EQ(model_keys, file_keys) << name;
    // hf_state_dict gives the files' layout back bit for bit (GPT-2's Conv1D transposed back).
    for (const auto& [k, t] : models::hf_state_dict(*model)) {
      const Tensor& f = files.at(k);
      ASSERT_EQ(t.shape(), f.shape()) << name << " " << k;
      EXPECT_EQ(bytes_of(t.to(f.dtype())), bytes_of(f)) << name << " " << k;
    }
  }
}

TEST(HfLoader, SaveHfWeightsRoundTrips) {
  testing::TempDir tmp;
  auto model = load_hf_model(hf_fixture_dir("gpt2"));
  models::save_hf_weights(*model, tmp.str());
  fs::copy_file(hf_fixture_dir("gpt2") + "/config.json", tmp.file("config.json"));
  const auto a = file_tensors(hf_fixture_dir("gpt2"));
  const auto b = file_tensors(tmp.str());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) EXPECT_EQ(bytes_of(b.at(k)), bytes_of(t)) << k;
}

TEST(HfLoader, Bf16FileLoadsAsBf16BitForBit) {
  const std::string dir = hf_fixture_dir("qwen2_bf16");
  auto model = load_hf_model(dir, {.dtype = kBFloat16});
  const auto files = file_tensors(dir);
  for (const auto& [k, t] : model->state_dict()) {
    EXPECT_EQ(t.dtype(), kBFloat16) << k;
    ASSERT_EQ(files.at(k).dtype(), kBFloat16) << k;
    EXPECT_EQ(bytes_of(t), bytes_of(files.at(k))) << k;
  }
  // The bf16 forward stays near transformers' fp32 logits of the same weights.
  const auto ref = hf_reference("qwen2_bf16");
  NoGradGuard g;
  const Tensor logits = model->forward(ref.input_ids);
  EXPECT_EQ(logits.dtype(), kBFloat16);
  const auto got = logits.to_vector<double>(), want = ref.logits.to_vector<double>();
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  EXPECT_LT(err / scale, 0.05);
  // Cached decoding in bf16 follows its own full forward. The full forward and the first chunk
  // attend in the fused kernel (fp32 softmax); the second chunk, whose queries follow cached
  // keys, in the composed form, whose softmax is rounded to bf16: 0.022 apart here, each within
  // 0.033 of the fp32 model's logits.
  models::KvCache cache;
  const Tensor a = model->forward(ref.greedy.narrow(1, 0, 10).contiguous(), cache);
  const Tensor b = model->forward(ref.greedy.narrow(1, 10, 12).contiguous(), cache);
  const auto cached = cat({a, b}, 1).to_vector<double>();
  const auto full = model->forward(ref.greedy).to_vector<double>();
  double diff = 0, top = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    diff = std::max(diff, std::abs(cached[i] - full[i]));
    top = std::max(top, std::abs(full[i]));
  }
  EXPECT_LT(diff / top, 0.03);
}

TEST(HfLoader, Fp32FileLoadsAsFp16AndBf16Rounded) {
  const std::string dir = hf_fixture_dir("llama_tied_llama3");
  const auto files = file_tensors(dir);
  for (DType dt : {kFloat16, kBFloat16}) {
    auto model = load_hf_model(dir, {.dtype = dt});
    for (const auto& [k, t] : model->state_dict()) {
      EXPECT_EQ(t.dtype(), dt) << k;
      EXPECT_EQ(bytes_of(t), bytes_of(files.at(k).to(dt))) << k;
    }
  }
}

void expect_same_4bit(const QuantizedTensor& got, const QuantizedTensor& want,
                      const std::string& k) {
  EXPECT_EQ(bytes_of(got.data), bytes_of(want.data)) << k;
  EXPECT_EQ(bytes_of(got.absmax), bytes_of(want.absmax)) << k;
  EXPECT_EQ(got.has_nested, want.has_nested) << k;
  if (want.has_nested) {
    EXPECT_EQ(bytes_of(got.nested.absmax), bytes_of(want.nested.absmax)) << k;
    EXPECT_EQ(got.nested.offset, want.nested.offset) << k;
  }
}

TEST(HfLoader, FourBitLoadEqualsQuantizingTheFp32Weights) {
  const std::string dir = hf_fixture_dir("llama_linear_sharded");
  const auto files = file_tensors(dir);
  for (const char* mode : {"nf4", "nf4-dq", "fp4-dq"}) {
    SCOPED_TRACE(mode);
    auto model = load_hf_model(dir, {.quantization = mode});
    const quant::FourBitOptions o{
        .format = std::string(mode).substr(0, 3) == "nf4" ? FormatId::kNf4 : FormatId::kFp4,
        .double_quant = std::string(mode).find("-dq") != std::string::npos};
    int quantized = 0;
    for (const auto& [name, m] : model->named_modules()) {
      if (name == "lm_head") {  // kept as it is, as transformers' bitsandbytes integration
        EXPECT_NE(dynamic_cast<nn::Linear*>(m), nullptr);
        continue;
      }
      auto* q = dynamic_cast<quant::Linear4bit*>(m);
      if (!q) {
        EXPECT_EQ(dynamic_cast<nn::Linear*>(m), nullptr) << name << " was not quantized";
        continue;
      }
      ++quantized;
      const Tensor w = files.at(name + ".weight");
      ASSERT_EQ(w.dtype(), kFloat32);
      expect_same_4bit(q->quantized_weight(), quant::quantize_4bit(w, o), name);
      EXPECT_EQ(testing::vals(q->bias), testing::vals(files.at(name + ".bias"))) << name;
    }
    EXPECT_EQ(quantized, 2 * 7);
    // The 4-bit model's cached decoding equals its own full forward.
    NoGradGuard g;
    const auto ref = hf_reference("llama_linear_sharded");
    const Tensor full = model->forward(ref.greedy);
    models::KvCache cache;
    const Tensor a = model->forward(ref.greedy.narrow(1, 0, 12).contiguous(), cache);
    const Tensor b = model->forward(ref.greedy.narrow(1, 12, 10).contiguous(), cache);
    const auto got = cat({a, b}, 1).to_vector<double>(), want = full.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-2 * (1 + std::abs(want[i])));
  }
}

TEST(HfLoader, Int8LoadQuantizesRowsAndGenerates) {
  const std::string dir = hf_fixture_dir("gpt2");
  const auto files = file_tensors(dir);
  auto model = load_hf_model(dir, {.quantization = "int8"});
  int quantized = 0;
  for (const auto& [name, m] : model->named_modules()) {
    auto* q = dynamic_cast<quant::Linear8bitLt*>(m);
    if (!q) continue;
    ++quantized;
    // The file's Conv1D weight [in, out], transposed, quantized row-wise by the layer itself.
    nn::Linear ref(q->in_features(), q->out_features(), true, kFloat32);
    {
      NoGradGuard g;
      ref.weight.copy_(files.at(name + ".weight").t());
      ref.bias.copy_(files.at(name + ".bias"));
    }
    const auto want = quant::Linear8bitLt::from_linear(ref);
    EXPECT_EQ(bytes_of(q->weight), bytes_of(want->weight)) << name;
    EXPECT_EQ(bytes_of(q->scb), bytes_of(want->scb)) << name;
  }
  EXPECT_EQ(quantized, 2 * 4);
  // Generation runs on the int8 model, its cached steps equal to its full forward's argmax.
  const auto ref = hf_reference("gpt2");
  const auto prompt = ref.input_ids.select(0, 1).to_vector<int64_t>();
  const auto out = models::generate(*model, prompt, {.max_new_tokens = 6});
  ASSERT_EQ(out.size(), 6u);
  std::vector<int64_t> seq = prompt;
  NoGradGuard g;
  for (int64_t t : out) {
    const Tensor logits = model->forward(tensor(seq, {1, static_cast<int64_t>(seq.size())}));
    const auto row =
        logits.select(1, static_cast<int64_t>(seq.size()) - 1).select(0, 0).to_vector<float>();
    EXPECT_EQ(std::max_element(row.begin(), row.end()) - row.begin(), t);
    seq.push_back(t);
  }
}

TEST(HfLoader, LoraWrapsTheNamedProjections) {
  auto llama = load_hf_model(hf_fixture_dir("llama_tied_llama3"), {.quantization = "nf4"});
  const auto wrapped = nn::apply_lora(*llama, {.r = 4, .target_modules = {"q_proj", "v_proj"}});
  EXPECT_EQ(wrapped, (std::vector<std::string>{
                         "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                         "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"}));
  auto gpt2 = load_hf_model(hf_fixture_dir("gpt2"));
  EXPECT_EQ(nn::apply_lora(*gpt2, {.r = 2, .target_modules = {"c_attn"}}).size(), 2u);
  // A fresh adapter (B = 0) leaves the logits as they were.
  const auto ref = hf_reference("gpt2");
  NoGradGuard g;
  const auto got = gpt2->forward(ref.input_ids).to_vector<double>();
  const auto want = ref.logits.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5);
}

TEST(HfLoader, ActivationCheckpointingGivesTheSameGradients) {
  const auto ref = hf_reference("llama_tied_llama3");
  std::vector<std::vector<double>> grads;
  for (bool ckpt : {false, true}) {
    auto model =
        load_hf_model(hf_fixture_dir("llama_tied_llama3"), {.activation_checkpointing = ckpt});
    model->train();
    sum(model->forward(ref.input_ids)).backward();
    grads.push_back(model->child("model")
                        ->child("layers")
                        ->child("0")
                        ->child("mlp")
                        ->child("up_proj")
                        ->named_parameters()[0]
                        .second.grad()
                        .to_vector<double>());
  }
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(HfLoader, RunsUnderAutocastAndWithFp8Layers) {
  const auto ref = hf_reference("llama_tied_llama3");
  auto relative = [&](const Tensor& logits) {
    const auto got = logits.to_vector<double>(), want = ref.logits.to_vector<double>();
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, std::abs(got[i] - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    return err / scale;
  };
  auto model = load_hf_model(hf_fixture_dir("llama_tied_llama3"));
  NoGradGuard g;
  {
    amp::autocast ac(DeviceType::kCPU, kBFloat16);
    const Tensor logits = model->forward(ref.input_ids);
    EXPECT_EQ(logits.dtype(), kBFloat16);
    const double err = relative(logits);
    EXPECT_GT(err, 0.0);  // bf16 arithmetic did run
    EXPECT_LT(err, 0.05);
  }
  // The transformer-engine plugin swaps every projection for an FP8 layer by name.
  train::TransformerEnginePrecision fp8("transformer-engine");
  fp8.convert_module(*model);
  int fp8_layers = 0;
  for (const auto& [name, m] : model->named_modules())
    if (dynamic_cast<fp8::Linear*>(m)) ++fp8_layers;
  EXPECT_EQ(fp8_layers, 2 * 7);
  train::ScopePtr scope = fp8.forward_context();
  EXPECT_LT(relative(model->forward(ref.input_ids)), 0.2);
}

TEST(HfLoader, BitsandbytesPluginConvertsALoadedModel) {
  // The other route to a quantized model: load in fp32, then the precision plugin replaces
  // every projection (lm_head kept by name), and forward and cached decoding run.
  auto model = load_hf_model(hf_fixture_dir("qwen2_bf16"));
  train::BitsandbytesPrecision plugin("nf4-dq", std::nullopt, {"lm_head"});
  plugin.convert_module(*model);
  const auto stats = train::BitsandbytesPrecision::quantized_stats(*model);
  EXPECT_EQ(stats.layers, 2 * 7);
  const auto ref = hf_reference("qwen2_bf16");
  const auto prompt = ref.input_ids.select(0, 0).to_vector<int64_t>();
  train::ScopePtr scope = plugin.forward_context();
  const auto out = models::generate(*model, prompt, {.max_new_tokens = 5});
  EXPECT_EQ(out.size(), 5u);
}

// --- peak memory ---

int64_t status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

// Writes a Llama directory of a few MB (random fp32 weights) without building a model.
void write_model(const std::string& dir, const json& config) {
  const int64_t V = config["vocab_size"], H = config["hidden_size"],
                I = config["intermediate_size"];
  const int64_t heads = config["num_attention_heads"], kv = config["num_key_value_heads"];
  const int64_t D = H / heads;
  io::NamedTensors t;
  Generator g(5);
  auto add = [&](const std::string& k, Shape s) {
    t.emplace_back(k, uniform(s, -0.1, 0.1, kFloat32, &g));
  };
  add("model.embed_tokens.weight", {V, H});
  for (int64_t l = 0; l < config["num_hidden_layers"].get<int64_t>(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    add(p + "self_attn.q_proj.weight", {heads * D, H});
    add(p + "self_attn.k_proj.weight", {kv * D, H});
    add(p + "self_attn.v_proj.weight", {kv * D, H});
    add(p + "self_attn.o_proj.weight", {H, heads * D});
    add(p + "mlp.gate_proj.weight", {I, H});
    add(p + "mlp.up_proj.weight", {I, H});
    add(p + "mlp.down_proj.weight", {H, I});
  }
  add("model.norm.weight", {H});
  add("lm_head.weight", {V, H});
  io::save_safetensors(dir + "/model.safetensors", t);
  std::ofstream(dir + "/config.json") << config.dump();
}

int64_t state_bytes(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [k, t] : m.state_dict()) n += static_cast<int64_t>(t.nbytes());
  return n;
}

// Peak resident memory a load adds, in bytes: the high-water mark is reset first
// (/proc/self/clear_refs), cached allocator blocks and free heap pages given back. The caller
// fixes glibc's mmap threshold, so that freed blocks leave the process instead of staying in a
// heap whose layout earlier tests decided: what is measured is the load's own memory.
struct PeakLoad {
  int64_t added = -1;
  int64_t model_bytes = 0;
};
PeakLoad measure_load(const std::string& dir, const models::HfLoadOptions& o) {
  empty_cache();
  malloc_trim(0);
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    if (!reset.good()) return {};
  }
  const int64_t base = status_kb("VmRSS");
  if (status_kb("VmHWM") > base + 256) return {};  // the reset did not take
  auto model = load_hf_model(dir, o);
  PeakLoad r;
  r.added = (status_kb("VmHWM") - base) * 1024;
  r.model_bytes = state_bytes(*model);
  return r;
}

TEST(HfLoader, QuantizedLoadPeaksNearTheFinalModelSize) {
  testing::TempDir tmp;
  const json config = {{"architectures", {"LlamaForCausalLM"}},
                       {"model_type", "llama"},
                       {"vocab_size", 2048},
                       {"hidden_size", 256},
                       {"intermediate_size", 704},
                       {"num_hidden_layers", 2},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 2},
                       {"max_position_embeddings", 128},
                       {"rms_norm_eps", 1e-6},
                       {"tie_word_embeddings", false}};
  write_model(tmp.str(), config);
  const int64_t largest_fp32 = 2048 * 256 * 4;  // the embedding and the head
  const int64_t cache_limit = allocator_cache_limit();
  set_allocator_cache_limit(0);
  mallopt(M_MMAP_THRESHOLD, 64 << 10);
  // Warm up whatever a first load starts (thread pools, lazily built tables).
  load_hf_model(tmp.str(), {.quantization = "nf4"});
  const PeakLoad fp32 = measure_load(tmp.str(), {});
  const PeakLoad nf4 = measure_load(tmp.str(), {.quantization = "nf4"});
  set_allocator_cache_limit(cache_limit);
  mallopt(M_MMAP_THRESHOLD, 128 << 10);  // glibc's default (now fixed rather than adaptive)
  if (fp32.added < 0 || nf4.added < 0)
    GTEST_SKIP() << "/proc/self/clear_refs cannot reset VmHWM here";
  // The measurement sees a load: the fp32 model's own bytes at least.
  EXPECT_GE(fp32.added, fp32.model_bytes * 9 / 10);
  // The nf4 load stays within its final size + the largest tensor in fp32 + 10 %, well below
  // the fp32 model it never materialises.
  EXPECT_LT(nf4.model_bytes, fp32.model_bytes / 2);
  EXPECT_LE(nf4.added, (nf4.model_bytes + largest_fp32) * 11 / 10)
      << "model " << nf4.model_bytes << " largest " << largest_fp32;
  std::cout << "peak added: fp32 " << fp32.added << " (model " << fp32.model_bytes << "), nf4 "
            << nf4.added << " (model " << nf4.model_bytes << ")\n";
}

// --- refusals ---

Tensor tensor_named(const io::NamedTensors& t, const std::string& name) {
  for (const auto& [k, v] : t)
    if (k == name) return v;
  ADD_FAILURE() << "no " << name;
  return Tensor();
}

void rewrite_file(const std::string& path, const std::function<void(io::NamedTensors&)>& edit) {
  io::SafetensorsFile f = io::load_safetensors(path);
  edit(f.tensors);
  io::save_safetensors(path, f.tensors, f.metadata);
}

void edit_config(const std::string& dir, const std::function<void(json&)>& edit) {
  json j;
  {
    std::ifstream in(dir + "/config.json");
    j = json::parse(in);
  }
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump();
}

TEST(HfLoader, RefusesBadDirectoriesNamingFileAndTensor) {
  struct Case {
    std::string fixture;
    std::function<void(const std::string& dir)> damage;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {"gpt2",
       [](const std::string& d) { fs::remove(d + "/model.safetensors"); },
       {"no model.safetensors or model.safetensors.index.json"}},
      {"llama_linear_sharded",
       [](const std::string& d) { fs::remove(d + "/model-00003-of-00009.safetensors"); },
       {"model.safetensors.index.json", "'model-00003-of-00009.safetensors'", "missing"}},
      {"llama_linear_sharded",
       [](const std::string& d) {
         json j;
         {
           std::ifstream in(d + "/model.safetensors.index.json");
           j = json::parse(in);
         }
         j["weight_map"]["model.norm.weight"] = "../model.safetensors";
         std::ofstream(d + "/model.safetensors.index.json") << j.dump();
       },
       {"'../model.safetensors'", "not a file in the model directory"}},
      {"gpt2",
       [](const std::string& d) {
         rewrite_file(d + "/model.safetensors", [](io::NamedTensors& t) {
           std::erase_if(t, [](const auto& p) { return p.first == "transformer.h.1.ln_2.bias"; });
         });
       },
       {"model.safetensors", "missing tensor 'transformer.h.1.ln_2.bias'"}},
      {"gpt2",
       [](const std::string& d) {
         rewrite_file(d + "/model.safetensors", [](io::NamedTensors& t) {
           t.emplace_back("transformer.h.9.ln_2.bias", zeros({64}));
         });
       },
       {"model.safetensors", "unexpected tensor 'transformer.h.9.ln_2.bias'"}},
      {"llama_tied_llama3",
       [](const std::string& d) { edit_config(d, [](json& j) { j["intermediate_size"] = 100; }); },
       {"model.safetensors", "gate_proj.weight", "[96, 64]", "[100, 64]", "config.json"}},
      {"gpt2",
       [](const std::string& d) { edit_config(d, [](json& j) { j["n_inner"] = 128; }); },
       {"model.safetensors", "c_fc.weight", "Conv1D"}},
      {"llama_tied_llama3",
       [](const std::string& d) {
         rewrite_file(d + "/model.safetensors", [](io::NamedTensors& t) {
           for (auto& [k, v] : t)
             if (k == "model.norm.weight") v = v.to(kFloat64);
         });
       },
       {"model.safetensors", "'model.norm.weight'", "F64", "F32, F16 or BF16"}},
      {"llama_tied_llama3",
       [](const std::string& d) {
         rewrite_file(d + "/model.safetensors", [](io::NamedTensors& t) {
           const Tensor emb = tensor_named(t, "model.embed_tokens.weight");
           t.emplace_back("lm_head.weight", mul(emb, 2.0));
         });
       },
       {"model.safetensors", "tie_word_embeddings", "lm_head.weight differs"}},
      {"gpt2",
       [](const std::string& d) {
         fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") - 100);
       },
       {"model.safetensors"}},
      {"gpt2", [](const std::string& d) { fs::remove(d + "/config.json"); }, {"config.json"}},
      // Qwen3's per-head norms are parameters like any other: missing is refused, and a Llama
      // file that has them is not a Llama.
      {"qwen3",
       [](const std::string& d) {
         rewrite_file(d + "/model.safetensors", [](io::NamedTensors& t) {
           std::erase_if(t, [](const auto& p) {
             return p.first == "model.layers.1.self_attn.q_norm.weight";
           });
         });
       },
       {"missing tensor 'model.layers.1.self_attn.q_norm.weight'", "Qwen3ForCausalLM"}},
      {"qwen3",
       [](const std::string& d) { edit_config(d, [](json& j) { j["head_dim"] = 16; }); },
       {"q_proj.weight", "[128, 64]", "[64, 64]"}},
      {"qwen3",
       [](const std::string& d) {
         edit_config(d, [](json& j) {
           j["architectures"] = {"LlamaForCausalLM"};
           j["model_type"] = "llama";
           for (const char* k :
                {"use_sliding_window", "max_window_layers", "layer_types", "sliding_window"})
             j.erase(k);
         });
       },
       {"unexpected tensor 'model.layers.", ".self_attn.k_norm.weight'", "LlamaForCausalLM"}},
      // Sizes the files contradict are refused before anything of that size is allocated.
      {"llama_tied_llama3",
       [](const std::string& d) {
         edit_config(d, [](json& j) { j["vocab_size"] = int64_t{1} << 38; });
       },
       {"model.embed_tokens.weight", "[274877906944, 64]"}},
      {"llama_tied_llama3",
       [](const std::string& d) {
         edit_config(d, [](json& j) { j["intermediate_size"] = int64_t{1} << 36; });
       },
       {"gate_proj.weight", "[68719476736, 64]"}},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp;
    testing::copy_hf_fixture(c.fixture, tmp.str());
    c.damage(tmp.str());
    const std::string msg = testing::error_of([&] { load_hf_model(tmp.str()); });
    ASSERT_FALSE(msg.empty()) << c.fixture << ": accepted " << c.pieces.front();
    for (const std::string& p : c.pieces)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
  }
}

// The q_norm and k_norm weights are the file's (perturbed away from ones) and change the
// logits: a loader or a layer that skipped them would not match transformers.
TEST(HfLoader, Qwen3HeadNormsAreLoadedAndApplied) {
  const auto ref = hf_reference("qwen3");
  const auto file = file_tensors(hf_fixture_dir("qwen3"));
  auto model = load_hf_model(hf_fixture_dir("qwen3"));
  const nn::StateDict state = model->state_dict();
  for (const char* key :
       {"model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"}) {
    ASSERT_TRUE(state.contains(key)) << key;
    EXPECT_EQ(state.at(key).shape(), Shape{32}) << key;  // head_dim, not hidden_size
    EXPECT_EQ(bytes_of(state.at(key)), bytes_of(file.at(key))) << key;
  }
  NoGradGuard no_grad;
  const Tensor logits = model->forward(ref.input_ids);
  for (const char* key :
       {"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight"}) {
    Tensor w = state.at(key);
    const Tensor kept = w.clone();
    w.fill_(1.0);
    const double moved = max(abs(sub(model->forward(ref.input_ids), logits))).item();
    EXPECT_GT(moved, 1e-3) << key << " is not applied";
    w.copy_(kept);
  }
}

// Mistral's sliding window (4 here, the input 10 tokens long): without it the first 4
// positions are unchanged and every later one differs, so the reference's window is 4 keys
// including the query's own.
TEST(HfLoader, MistralSlidingWindowMasksOlderKeys) {
  const auto ref = hf_reference("mistral");
  testing::TempDir tmp;
  testing::copy_hf_fixture("mistral", tmp.str());
  edit_config(tmp.str(), [](json& j) { j["sliding_window"] = nullptr; });
  auto full = load_hf_model(tmp.str());
  NoGradGuard no_grad;
  const Tensor diff = abs(sub(full->forward(ref.input_ids), ref.logits));  // (2, 10, V)
  for (int64_t t = 0; t < diff.size(1); ++t) {
    const double d = max(diff.narrow(1, t, 1)).item();
    if (t < 4)
      EXPECT_LE(d, 1e-4) << "position " << t;
    else
      EXPECT_GT(d, 1e-3) << "position " << t;
  }
}

TEST(HfLoader, TiedHeadEqualToTheEmbeddingIsAccepted) {
  testing::TempDir tmp;
  testing::copy_hf_fixture("llama_tied_llama3", tmp.str());
  rewrite_file(tmp.file("model.safetensors"), [](io::NamedTensors& t) {
    t.emplace_back("lm_head.weight", tensor_named(t, "model.embed_tokens.weight").clone());
  });
  auto model = load_hf_model(tmp.str());
  EXPECT_FALSE(model->state_dict().contains("lm_head.weight"));
}

TEST(HfLoader, OlderLlamaRotaryBuffersAreSkippedAndPicklesNamed) {
  testing::TempDir tmp;
  testing::copy_hf_fixture("llama_tied_llama3", tmp.str());
  rewrite_file(tmp.file("model.safetensors"), [](io::NamedTensors& t) {
    t.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", ones({8}));
  });
  auto model = load_hf_model(tmp.str());
  const auto ref = hf_reference("llama_tied_llama3");
  NoGradGuard g;
  const auto got = model->forward(ref.input_ids).to_vector<double>();
  const auto want = ref.logits.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5);
  fs::remove(tmp.file("model.safetensors"));
  std::ofstream(tmp.file("pytorch_model.bin")) << "pickle";
  testing::expect_error([&] { load_hf_model(tmp.str()); }, {"pytorch_model.bin", "pickles"});
}

TEST(HfLoader, Gpt2FilesWithoutTheTransformerPrefixLoad) {
  // The hub's gpt2 file was saved from GPT2Model: "h.0.attn.c_attn.weight", "wte.weight", and
  // the causal-mask buffers "h.0.attn.bias".
  testing::TempDir tmp;
  testing::copy_hf_fixture("gpt2", tmp.str());
  rewrite_file(tmp.file("model.safetensors"), [](io::NamedTensors& t) {
    for (auto& [k, v] : t) k = k.substr(std::string("transformer.").size());
    t.emplace_back("h.0.attn.bias", ones({1, 1, 64, 64}));
  });
  auto model = load_hf_model(tmp.str());
  const auto ref = hf_reference("gpt2");
  NoGradGuard g;
  const auto got = model->forward(ref.input_ids).to_vector<double>();
  const auto want = ref.logits.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5);
}

}  // namespace
}  // namespace mantissa
