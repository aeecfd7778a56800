#include "mantissa/optim/optimizer_factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/optim/adam.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/sgd.h"

namespace mantissa::optim {

const char* optimizer_names() { return "adamw, adam, sgd, adamw8bit, adam8bit"; }

void check_optimizer_name(const std::string& name, const char* where) {
  static const std::vector<std::string> kNames = {"adamw", "adam", "sgd", "adamw8bit", "adam8bit"};
  if (std::find(kNames.begin(), kNames.end(), name) != kNames.end()) return;
  // A near miss ("adamw8", "AdamW") gets its likely name, as a misspelt precision does.
  const std::string meant = likely_meant(name, kNames);
  const std::string hint = meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant);
  fail(where, "unknown --optimizer '{}'{}; valid values are: {}", name, hint, optimizer_names());
}

bool is_8bit_optimizer(const std::string& name) {
  return name == "adamw8bit" || name == "adam8bit";
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t first = item.find_first_not_of(" \t");
    if (first != std::string::npos)
      out.push_back(item.substr(first, item.find_last_not_of(" \t") - first + 1));
  }
  return out;
}

namespace {
// Frozen parameters (quantized bases, LoRA's base weights) get no optimizer state.
std::vector<Tensor> trainable_parameters(const nn::Module& model) {
  std::vector<Tensor> out;
  for (const Tensor& p : model.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// The 8-bit optimizers exist to save memory, and may keep more than the plain ones: their
// tensors below min_8bit_size keep fp32 moments (8 bytes per element) whatever the parameter's
// dtype, where Adam keeps a bfloat16/float16 parameter's moments in its dtype (4 bytes). Under
// bf16-true with LoRA, whose adapters are mostly small, adamw8bit kept 4.51 bytes per parameter
// against adamw's 4.00, and only a model with no 8-bit tensor at all was warned about.
// bitsandbytes says nothing either way. The bytes are those Optimizer::state_bytes() will count
// once every trainable tensor has stepped, under `opt` and under the plain optimizer of the same
// update (adamw for adamw8bit, adam for adam8bit) with the same fp32_state and master_weights.
void warn_when_8bit_saves_nothing(const OptimizerChoice& c, const Adam8bitOptions& o,
                                  const Adam8bit& opt, const nn::Module& model) {
  int64_t elements = 0, eight_bit_bytes = 0, plain_bytes = 0;
  size_t tensors = 0, eight_bit_tensors = 0, kept = 0;
  int64_t eight_bit_elements = 0, largest_small = 0;
  bool any_half = false, any_half_moments = false, any_wide_moments = false;
  std::vector<std::string> small;  // "name (N elements)", below min_8bit_size
  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;  // as trainable_parameters: no state
    const int64_t n = p.numel();
    const bool half = p.dtype() == kFloat16 || p.dtype() == kBFloat16;
    any_half = any_half || half;
    // A half parameter's fp32 master copy: 4 bytes per element under either optimizer.
    const int64_t master = half && c.master_weights ? 4 * n : 0;
    ++tensors;
    elements += n;
    if (opt.uses_8bit_state(p)) {
      ++eight_bit_tensors;
      eight_bit_elements += n;
      // state1, state2: one byte each; absmax1, absmax2: one fp32 per block.
      const int64_t blocks = (n + Adam8bit::kBlockSize - 1) / Adam8bit::kBlockSize;
      eight_bit_bytes += 2 * n + 2 * 4 * blocks + master;
    } else {
      eight_bit_bytes += 2 * 4 * n + master;  // exp_avg, exp_avg_sq in fp32
      if (n >= o.min_8bit_size) {
        ++kept;
      } else {
        largest_small = std::max(largest_small, n);
        small.push_back(fmt::format("{} ({} elements)", name, n));
      }
    }
    // Adam's moments: the parameter's dtype, fp32 for a half one with fp32_state or master
    // weights (Optimizer::state_dtype).
    const bool half_moments = half && !c.fp32_state && !c.master_weights;
    any_half_moments = any_half_moments || half_moments;
    any_wide_moments = any_wide_moments || !half_moments;
    const int64_t moment_bytes =
        half ? (half_moments ? p.dtype().itemsize() : 4) : p.dtype().itemsize();
    plain_bytes += 2 * moment_bytes * n + master;
  }
  if (tensors == 0 || eight_bit_bytes < plain_bytes) return;

  const std::string plain = c.name == "adam8bit" ? "adam" : "adamw";
  const size_t others = tensors - eight_bit_tensors;
  const std::string why =
      kept == 0 ? fmt::format("the largest has {} elements; 8-bit state needs at least {}",
                              largest_small, o.min_8bit_size)
      : kept == others
          ? std::string("each is kept 32-bit by --optim-bits-32 or the embeddings rule")
          : fmt::format(
                "{} kept 32-bit by --optim-bits-32 or the embeddings rule, the others below "
                "{} elements, the largest {}",
                kept, o.min_8bit_size, largest_small);
  const std::string which =
      eight_bit_tensors == 0
          ? fmt::format("none of the {} trainable parameter tensors gets 8-bit state ({})", tensors,
                        why)
          : fmt::format(
                "{} of the {} trainable parameter tensors {} 8-bit state ({} of {} elements); "
                "the other {} keep fp32 moments ({})",
                eight_bit_tensors, tensors, eight_bit_tensors == 1 ? "gets" : "get",
                eight_bit_elements, elements, others, why);
  const auto per_param = [&](int64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(elements);
  };
  const std::string moments = !any_wide_moments  ? "moments in the parameters' half dtype"
                              : any_half_moments ? "moments in each parameter's dtype"
                                                 : "fp32 moments";
  const std::string masters =
      any_half && c.master_weights ? ", fp32 master weights included in both" : "";
  std::string fix = fmt::format("use --optimizer {}", plain);
  if (!small.empty()) {
    const size_t n = small.size();
    if (n > 4) {
      small.resize(4);
      small.push_back(fmt::format("... {} more", n - 4));
    }
    fix += fmt::format(" (8-bit state saves on tensors of at least {} elements; below it here: {})",
                       o.min_8bit_size, fmt::join(small, ", "));
  }
  warn_once(fmt::format(
      "--optimizer {}: {}: its state is {:.2f} bytes per parameter, {} --optimizer {}'s {:.2f} "
      "({}{}); {}",
      c.name, which, per_param(eight_bit_bytes),
      eight_bit_bytes == plain_bytes ? "no saving over" : "more than", plain,
      per_param(plain_bytes), moments, masters, fix));
}

}  // namespace

std::shared_ptr<Optimizer> make_optimizer(const OptimizerChoice& c, nn::Module& model) {
  check_optimizer_name(c.name);
  MANTISSA_CHECK(c.optim_bits_32.empty() || is_8bit_optimizer(c.name), "train",
                 "--optim-bits-32 applies to the 8-bit optimizers (adamw8bit, adam8bit), not "
                 "--optimizer {}",
                 c.name);
  if (c.name == "adam" || c.name == "adamw") {
    AdamOptions o = adamw_defaults();
    o.lr = c.lr;
    o.weight_decay = c.weight_decay;
    o.master_weights = c.master_weights;
    o.stochastic_rounding = c.stochastic_rounding;
    o.fp32_state = c.fp32_state;
    if (c.name == "adam") return std::make_shared<Adam>(trainable_parameters(model), o);
    return std::make_shared<AdamW>(trainable_parameters(model), o);
  }
  if (c.name == "sgd") {
    SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    o.master_weights = c.master_weights;
    o.stochastic_rounding = c.stochastic_rounding;
    o.fp32_state = c.fp32_state;
    return std::make_shared<SGD>(trainable_parameters(model), o);
  }
  MANTISSA_CHECK(!c.stochastic_rounding, "train",
                 "--stochastic-rounding is not available with --optimizer {}; use "
                 "--master-weights or plain rounding",
                 c.name);
  Adam8bitOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  o.master_weights = c.master_weights;
  std::shared_ptr<Adam8bit> opt;
  if (c.name == "adam8bit")
    opt = std::make_shared<Adam8bit>(trainable_parameters(model), o);
  else
    opt = std::make_shared<AdamW8bit>(trainable_parameters(model), o);
  if (c.embeddings_32bit) keep_embeddings_32bit(*opt, model);
  if (!c.optim_bits_32.empty()) {
    // Named by the flag the names came from: "[override_optim_bits] no parameter name contains
    // 'atn'" did not say which of a long command line's flags to correct.
    try {
      override_optim_bits(*opt, model, c.optim_bits_32, 32);
    } catch (const Error& e) {
      std::string what = e.what();
      const std::string prefix = "[override_optim_bits] ";
      if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
      fail("optimizer", "--optim-bits-32: {}", what);
    }
  }
  warn_when_8bit_saves_nothing(c, o, *opt, model);
  return opt;
}

}  // namespace mantissa::optim
