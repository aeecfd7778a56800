#include "mantissa/recipes/model_footprint.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "mantissa/core/allocator.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Products and sums of non-negative sizes that stop at INT64_MAX instead of wrapping: a size
// that large is refused anyway, and a wrapped one could look small.
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kMax : r;
}
int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kMax : r;
}
template <typename... Rest>
int64_t add(int64_t a, int64_t b, Rest... rest) {
  return add(add(a, b), rest...);
}

// A Linear layer's weight and optional bias.
int64_t linear(int64_t in, int64_t out, bool bias) { return add(mul(in, out), bias ? out : 0); }

int64_t llama_layer(const models::HfConfig& c) {
  const int64_t q = mul(c.num_attention_heads, c.head_dim);
  const int64_t kv = mul(c.num_key_value_heads, c.head_dim);
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  return add(linear(h, q, c.qkv_bias), linear(h, kv, c.qkv_bias), linear(h, kv, c.qkv_bias),
             linear(q, h, c.o_bias), linear(h, i, c.mlp_bias), linear(h, i, c.mlp_bias),
             linear(i, h, c.mlp_bias), mul(2, h),  // two RMSNorm weights
             c.qk_norm ? mul(2, c.head_dim) : 0);  // Qwen3's q_norm and k_norm
}

int64_t gpt2_layer(const models::HfConfig& c) {
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  return add(mul(4, h),  // two LayerNorms' weights and biases
             linear(h, mul(3, h), true), linear(h, h, true), linear(h, i, true),
             linear(i, h, true));
}

// The value of a "Key:   123 kB" line of /proc/meminfo, in bytes.
std::optional<int64_t> meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = 0;
    if (fields >> kib) return mul(kib, 1024);
  }
  return std::nullopt;
}

// A number in a cgroup file ("max" or absent: nullopt).
std::optional<int64_t> cgroup_number(const char* path) {
  std::ifstream in(path);
  int64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

std::string count_text(int64_t n) {
  if (n == kMax) return fmt::format("more than {:.3g}", static_cast<double>(kMax));
  return n < 1000000 ? fmt::format("{}", n) : fmt::format("{:.3g}", static_cast<double>(n));
}

}  // namespace

int64_t mlp_parameter_count(int64_t in_features, const std::vector<int64_t>& hidden,
                            int64_t num_classes) {
  int64_t n = 0, width = in_features;
  for (int64_t h : hidden) {
    n = add(n, linear(width, h, true));
    width = h;
  }
  return add(n, linear(width, num_classes, true));
}

int64_t gpt_parameter_count(const models::GPTConfig& c) {
  const int64_t w = c.width;
  // A block: two LayerNorms, the attention's in- and out-projections, the 4x MLP.
  const int64_t block = add(mul(4, w), linear(w, mul(3, w), true), linear(w, w, true),
                            linear(w, mul(4, w), true), linear(mul(4, w), w, true));
  return add(mul(c.vocab, w), mul(c.context, w), mul(c.layers, block), mul(2, w),
             c.tie_embeddings ? 0 : mul(c.vocab, w));
}

int64_t hf_parameter_count(const models::HfConfig& c) {
  const int64_t h = c.hidden_size;
  const bool gpt2 = c.architecture == models::HfArchitecture::kGpt2;
  const int64_t embeddings =
      add(mul(c.vocab_size, h), gpt2 ? mul(c.max_position_embeddings, h) : 0);
  const int64_t layers = mul(c.num_hidden_layers, gpt2 ? gpt2_layer(c) : llama_layer(c));
  const int64_t final_norm = gpt2 ? mul(2, h) : h;
  return add(embeddings, layers, final_norm, c.tie_word_embeddings ? 0 : mul(h, c.vocab_size));
}

ParameterBits parameter_bits(const std::string& precision, DType param_dtype,
                             const std::string& optimizer, bool fp32_state, bool training) {
  ParameterBits b;
  const train::PrecisionTraits traits = train::precision_traits(precision);
  if (traits.quantized_weights) {  // frozen 4-bit or 8-bit base weights
    return {.weight = traits.weight_bits, .gradient = 0, .state = 0};
  }
  const int64_t bits = static_cast<int64_t>(param_dtype.itemsize()) * 8;
  b.weight = bits;
  if (!training) return {.weight = bits, .gradient = 0, .state = 0};
  b.gradient = bits;
  const int64_t moment = fp32_state ? 32 : bits;
  if (optimizer == "sgd") {
    b.state = moment;
  } else if (optimizer == "adamw8bit" || optimizer == "adam8bit") {
    b.state = 16;
  } else {
    b.state = 2 * moment;
  }
  return b;
}

ParameterBits per_rank_bits(ParameterBits bits, const std::string& strategy) {
  if (strategy != "fsdp" || !dist::launched_by_mpi() || dist::launcher_world_size() <= 1)
    return bits;
  const int64_t ranks = dist::launcher_world_size();
  bits.gradient = (bits.gradient + ranks - 1) / ranks;
  bits.state = (bits.state + ranks - 1) / ranks;
  return bits;
}

int64_t ModelFootprint::bytes() const {
  const int64_t total = mul(parameters, bits.total());
  return total == kMax ? kMax : total / 8;
}

std::optional<int64_t> available_memory_bytes() {
  std::optional<int64_t> avail = meminfo_bytes("MemAvailable");
  // cgroup v2: what the group may still take.
  const auto max = cgroup_number("/sys/fs/cgroup/memory.max");
  const auto current = cgroup_number("/sys/fs/cgroup/memory.current");
  if (max && current) {
    const int64_t room = std::max<int64_t>(0, *max - *current);
    avail = avail ? std::min(*avail, room) : room;
  }
  return avail;
}

MemoryBound memory_bound(const std::string& memory_limit, bool host_memory) {
  MemoryBound b;
  if (host_memory) b.available = available_memory_bytes();
  if (!memory_limit.empty()) {
    b.limit = parse_byte_size(memory_limit, "--memory-limit");
    b.limit_text = memory_limit;
  }
  return b;
}

void announce_large_build(const ModelFootprint& f, const char* command, bool quiet) {
  if (quiet || f.bytes() < (int64_t{1} << 30)) return;
  fmt::print(
      "mantissa {}: building the model: {} parameters, at least {} {} in {} (Ctrl-C stops "
      "at once)\n",
      command, count_text(f.parameters), memory_size_text(f.bytes()),
      f.bits.gradient == 0 && f.bits.state == 0 ? "to hold" : "to train", f.precision);
  std::fflush(stdout);
}

std::string memory_size_text(int64_t bytes) {
  if (bytes == kMax) return "more than 8 EiB";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.3g} {}", v, units[u]);
}

void check_model_fits(const ModelFootprint& f, const MemoryBound& bound, const std::string& what,
                      const std::string& remedy) {
  const int64_t need = f.bytes();
  const bool over_limit = bound.limit && need > *bound.limit;
  const bool over_machine = bound.available && need > *bound.available;
  if (!over_limit && !over_machine) return;
  const std::string parts = f.bits.gradient == 0 && f.bits.state == 0
                                ? "weights"
                                : fmt::format("weights, gradients and {} state", f.optimizer);
  const std::string per =
      fmt::format("{:g} byte{} a parameter", static_cast<double>(f.bits.total()) / 8,
                  f.bits.total() == 8 ? "" : "s");
  const std::string room =
      over_limit ? fmt::format("--memory-limit {} allows {}", bound.limit_text,
                               memory_size_text(*bound.limit))
                 : fmt::format("this machine has {} available", memory_size_text(*bound.available));
  throw OutOfMemoryError(
      fmt::format("{}: the model has {} parameters, which take {} in {} ({}, {}); {}. {}", what,
                  count_text(f.parameters),
                  need == kMax ? memory_size_text(need) : "at least " + memory_size_text(need),
                  f.precision, parts, per, room, remedy));
}

}  // namespace mantissa::recipes
