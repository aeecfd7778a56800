#include "mantissa/optim/optimizer_factory.h"

#include <fmt/format.h>

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

void check_optimizer_name(const std::string& name) {
  static const std::vector<std::string> kNames = {"adamw", "adam", "sgd", "adamw8bit", "adam8bit"};
  if (std::find(kNames.begin(), kNames.end(), name) != kNames.end()) return;
  // A near miss ("adamw8", "AdamW") gets its likely name, as a misspelt precision does.
  const std::string meant = likely_meant(name, kNames);
  const std::string hint = meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant);
  fail("train", "unknown --optimizer '{}'{}; valid values are: {}", name, hint, optimizer_names());
}

bool is_8bit_optimizer(const std::string& name) {
  return name == "adamw8bit" || name == "adam8bit";
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
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
  // A model whose every trainable tensor is small (or kept 32-bit) trained with the 8-bit
  // optimizer's name and the 32-bit optimizer's memory, without a word (bitsandbytes is silent).
  const std::vector<Tensor> trained = trainable_parameters(model);
  if (!trained.empty() && std::none_of(trained.begin(), trained.end(),
                                       [&](const Tensor& p) { return opt->uses_8bit_state(p); })) {
    // Large enough yet 32-bit: kept so by --optim-bits-32 or the embeddings rule.
    int64_t largest_small = 0;
    size_t kept = 0;
    for (const Tensor& p : trained) {
      if (p.numel() >= o.min_8bit_size) {
        ++kept;
      } else {
        largest_small = std::max(largest_small, p.numel());
      }
    }
    const std::string why =
        kept == 0 ? fmt::format("the largest has {} elements; 8-bit state needs at least {}",
                                largest_small, o.min_8bit_size)
        : kept == trained.size()
            ? std::string("each is kept 32-bit by --optim-bits-32 or the embeddings rule")
            : fmt::format(
                  "{} kept 32-bit by --optim-bits-32 or the embeddings rule, the others below "
                  "{} elements, the largest {}",
                  kept, o.min_8bit_size, largest_small);
    warn_once(fmt::format(
        "--optimizer {}: none of the {} trainable parameter tensors gets 8-bit state ({}): its "
        "state is 32-bit, 8 bytes per parameter, no saving over --optimizer adamw",
        c.name, trained.size(), why));
  }
  return opt;
}

}  // namespace mantissa::optim
