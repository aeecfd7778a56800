// apply_lora: wraps the matching Linear-like layers of a model in LoRALinear, in place, through
// replace_modules (so every other name in the model stays the same).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/replace.h"
#include "text/regex.h"

namespace mantissa::nn {
namespace {

// peft's target matching: the whole name, or its last dotted parts.
bool name_matches(const std::string& name, const std::vector<std::string>& targets) {
  if (targets.empty()) return true;
  for (const std::string& t : targets) {
    if (name == t) return true;
    if (name.size() > t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0 &&
        name[name.size() - t.size() - 1] == '.')
      return true;
  }
  return false;
}

std::string parent_name(const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  return dot == std::string::npos ? std::string() : qualified.substr(0, dot);
}

}  // namespace

std::function<bool(const std::string& name)> lora_target_matcher(const LoraConfig& c) {
  if (c.target_regex.empty()) {
    return [targets = c.target_modules](const std::string& name) {
      return name_matches(name, targets);
    };
  }
  MANTISSA_CHECK(c.target_modules.empty(), "apply_lora",
                 "the LoRA targets are a list of names or one regular expression, as peft's "
                 "target_modules; both were given ([{}] and {})",
                 fmt::join(c.target_modules, ", "), quote_untrusted(c.target_regex, 200));
  const auto regex = std::make_shared<const text::detail::Regex>(
      text::detail::Regex::full_match(c.target_regex, "apply_lora", "the LoRA targets"));
  return [regex](const std::string& name) { return regex->search(name); };
}

std::string lora_targets_text(const LoraConfig& c) {
  if (!c.target_regex.empty())
    return quote_untrusted(c.target_regex, 200) +
           " (a regular expression that a layer's whole name must match)";
  return escape_untrusted(fmt::format("[{}]", fmt::join(c.target_modules, ", ")));
}

std::vector<std::string> apply_lora(Module& root, const LoraConfig& c) {
  validate(LoraOptions{.r = c.r, .alpha = c.alpha, .dropout = c.dropout});
  const auto targeted = lora_target_matcher(c);
  std::vector<std::string> wrapped, linear_like;
  auto inside_lora = [&root](const std::string& name) {
    for (std::string p = parent_name(name);; p = parent_name(p)) {
      if (dynamic_cast<LoRALinear*>(&root.get_submodule(p)) != nullptr) return true;
      if (p.empty()) return false;
    }
  };
  int64_t already = 0;  // layers wrapped by an earlier apply_lora
  auto match = [&](const std::string& name, Module& m) {
    if (dynamic_cast<LoRALinear*>(&m) != nullptr) {
      ++already;
      return false;
    }
    if (!linear_features(m)) return false;
    if (inside_lora(name)) return false;
    linear_like.push_back(name);
    return targeted(name);
  };
  auto make = [&](const std::string& name, std::shared_ptr<Module> old) -> std::shared_ptr<Module> {
    const LinearFeatures f = *linear_features(*old);
    wrapped.push_back(name);
    return std::make_shared<LoRALinear>(
        std::move(old), f, LoraOptions{.r = c.r, .alpha = c.alpha, .dropout = c.dropout}, c.gen,
        c.dropout_gen);
  };
  replace_modules(root, match, make);
  MANTISSA_CHECK(!wrapped.empty() || already == 0 || !linear_like.empty(), "apply_lora",
                 "every Linear-like layer of the model already has LoRA adapters ({} LoRALinear "
                 "layers): apply_lora was called on it before",
                 already);
  // LoRA adapts Linear-like layers only: a model without any (a convolutional stack) has nothing
  // to wrap whatever the targets say.
  MANTISSA_CHECK(!linear_like.empty(), "apply_lora",
                 "the model has no Linear-like layer (nn::Linear, a quantized Linear, an "
                 "attention projection) for LoRA adapters to wrap");
  MANTISSA_CHECK(!wrapped.empty(), "apply_lora",
                 "no layer matched the LoRA targets {}; the model's Linear-like layers are: [{}]",
                 lora_targets_text(c), fmt::join(linear_like, ", "));
  return wrapped;
}

}  // namespace mantissa::nn
