// LoRA adapters: the LoRALinear wrapper, the recognisers of Linear-like layers, apply_lora and
// the freezing helpers. Numbers follow peft's LoraLayer (nn.Linear adapters, kaiming-uniform A,
// zero B, dropout on the adapter input, scaling alpha / r).
#include "mantissa/nn/lora.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <mutex>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/replace.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::nn {
namespace {

struct Recognisers {
  std::mutex mutex;
  std::vector<std::pair<std::string, LinearLikeFn>> list;
};

Recognisers& recognisers() {
  static Recognisers r;
  return r;
}

// Adapters are kept in fp32 whatever the base computes in (peft's autocast_adapter_dtype),
// except in an fp64 model (gradient checks), where they follow it.
DType adapter_dtype(const Module& base) {
  for (const auto& [name, t] : base.named_parameters(/*recurse=*/false)) {
    if (name == "weight" && t.dtype() == kFloat64) return kFloat64;
  }
  return kFloat32;
}

bool is_adapter_name(const std::string& name) {
  return name.find("lora_A.") != std::string::npos || name.find("lora_B.") != std::string::npos;
}

}  // namespace

void validate(const LoraOptions& o) {
  MANTISSA_CHECK(o.r >= 1, "LoRA", "the rank r must be at least 1, got {}", o.r);
  MANTISSA_CHECK(std::isfinite(o.alpha) && o.alpha > 0, "LoRA",
                 "alpha must be finite and positive, got {}", o.alpha);
  MANTISSA_CHECK(o.alpha / static_cast<double>(o.r) <= kMaxLoraScaling, "LoRA",
                 "alpha {} with r {} scales the adapters by {:g}; the scaling alpha / r must be "
                 "at most {:g} (usual settings give 0.5 to 64)",
                 o.alpha, o.r, o.alpha / static_cast<double>(o.r), kMaxLoraScaling);
  MANTISSA_CHECK(o.dropout >= 0 && o.dropout < 1, "LoRA", "dropout must be in [0, 1), got {}",
                 o.dropout);
}

// ---- Linear-like layers ----

void register_linear_like(const std::string& key, LinearLikeFn recognise) {
  Recognisers& r = recognisers();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [k, fn] : r.list) {
    if (k == key) {
      fn = std::move(recognise);
      return;
    }
  }
  r.list.emplace_back(key, std::move(recognise));
}

std::optional<LinearFeatures> linear_features(const Module& m) {
  if (const auto* l = dynamic_cast<const Linear*>(&m))
    return LinearFeatures{l->in_features(), l->out_features()};
  Recognisers& r = recognisers();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [key, fn] : r.list) {
    if (auto f = fn(m)) return f;
  }
  return std::nullopt;
}

// ---- LoRALinear ----

LoRALinear::LoRALinear(std::shared_ptr<Module> base, LinearFeatures features,
                       const LoraOptions& options, Generator* gen, Generator* dropout_gen)
    : Module("LoRALinear"), features_(features), options_(options) {
  MANTISSA_CHECK(base != nullptr, "LoRALinear", "the base layer is null");
  validate(options);
  MANTISSA_CHECK(features.in_features > 0 && features.out_features > 0, "LoRALinear",
                 "the base layer must have positive features, got in {} out {}",
                 features.in_features, features.out_features);
  scaling_ = options.alpha / static_cast<double>(options.r);
  const DType dtype = adapter_dtype(*base);
  // The base is frozen: LoRA trains the adapters instead of the weight.
  for (const auto& [name, t] : base->named_parameters(/*recurse=*/false)) {
    if (name == "weight") Tensor(t).requires_grad_(false);
  }
  register_module("base_layer", std::move(base));
  lora_A_ = register_module("lora_A", std::make_shared<Linear>(features.in_features, options.r,
                                                               /*with_bias=*/false, dtype, gen));
  lora_B_ = register_module("lora_B", std::make_shared<Linear>(options.r, features.out_features,
                                                               /*with_bias=*/false, dtype, gen));
  // peft's reset_lora_parameters(init_lora_weights=True): A keeps nn.Linear's
  // kaiming_uniform_(a=sqrt(5)) draw, B starts at zero.
  init::zeros_(lora_B_->weight);
  dropout_ =
      register_module("lora_dropout", std::make_shared<Dropout>(options.dropout, dropout_gen));
}

namespace {

// Whether add(result, h, scaling) equals add(result, mul(h, scaling).to(result's dtype)) bit
// for bit (see LoRALinear::forward).
bool scaling_is_exact(double scaling, const Tensor& h, const Tensor& result) {
  int exponent = 0;
  const bool power_of_two = std::frexp(scaling, &exponent) == 0.5 && scaling >= 1;
  const DType d = h.dtype();
  return power_of_two && (d == kBFloat16 || d == kFloat32 || d == kFloat64) &&
         promote_types(result.dtype(), d) == result.dtype();
}

}  // namespace

Tensor LoRALinear::forward(const Tensor& input) {
  Tensor result = base_layer()->forward(input);
  if (merged_) return result;
  // The modules now in the slots, not the ones built here: whoever put others there (a
  // conversion, a user) means those to run; modules built here and replaced ran before while
  // the slots' modules, saved in every checkpoint, did nothing.
  Tensor x = child("lora_dropout")->forward(input.to(slot_weight("lora_A").dtype()));
  Tensor h = child("lora_B")->forward(child("lora_A")->forward(x));
  // peft's result + h * scaling, with h * scaling rounded to h's dtype. A power-of-two scaling of
  // at least 1 multiplies exactly in bf16, fp32 and f64 (fp32's exponent range), so one add
  // with alpha gives the same bits without the scaled copy and its cast when result is as wide.
  if (scaling_is_exact(scaling_, h, result)) return add(result, h, scaling_);
  return add(result, mul(h, scaling_).to(result.dtype()));
}

void LoRALinear::upgrade_state_dict(const std::string& prefix, StateDict& state) const {
  for (const auto& [name, child] : named_children()) {
    if (name != "lora_A" && name != "lora_B") continue;
    const StateDict own = child->state_dict();
    for (const char* buffer : {"fp8_scale", "fp8_amax_history"}) {
      const std::string key = prefix + name + "." + buffer;
      if (state.contains(key) && !own.contains(buffer)) state.erase(key);
    }
  }
}

Tensor LoRALinear::slot_weight(const std::string& slot) const {
  for (const auto& [name, t] : child(slot)->named_parameters(/*recurse=*/false)) {
    if (name == "weight") return t;
  }
  fail("LoRALinear", "the module in the '{}' slot ({}) has no 'weight' parameter", slot,
       child(slot)->name());
}

std::shared_ptr<Module> LoRALinear::base_layer() const {
  for (const auto& [name, m] : child_slots()) {
    if (name == "base_layer") return m;
  }
  fail("LoRALinear", "the base_layer slot is missing");
}

std::string LoRALinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, r={}, alpha={}, dropout={}{}",
                     features_.in_features, features_.out_features, options_.r, options_.alpha,
                     options_.dropout, merged_ ? ", merged" : "");
}

Tensor LoRALinear::delta_weight() const {
  NoGradGuard no_grad;
  const Tensor b = slot_weight("lora_B").detach().to(kFloat64);
  const Tensor a = slot_weight("lora_A").detach().to(kFloat64);
  return mul(matmul(b, a), scaling_);
}

namespace {

// The weight an adapter merges into: the base's floating-point "weight" parameter of shape
// [out, in]. nn::Linear has one, and so has an FP8 layer (fp8::Linear keeps its weight in
// bf16/fp16/fp32 and casts it to FP8 for each product; its cast cache is keyed on the weight's
// version, which the merge's write bumps, so the next product casts the merged weight). So
// merge takes nn::Linear and FP8 bases alike. Undefined for a base whose weight is
// quantized (4-bit codes or int8 rows, held as buffers): a float update cannot be added there.
Tensor mergeable_weight(const Module& base, const LinearFeatures& f) {
  for (const auto& [name, t] : base.named_parameters(/*recurse=*/false)) {
    if (name == "weight" && t.dtype().is_floating_point() && !t.dtype().is_float8() &&
        t.dim() == 2 && t.size(0) == f.out_features && t.size(1) == f.in_features)
      return t;
  }
  return {};
}

}  // namespace

void LoRALinear::merge() {
  Tensor w = mergeable_weight(*base_layer(), features_);
  MANTISSA_CHECK(w.defined(), "LoRALinear::merge",
                 "the base ({}) keeps no floating-point weight of shape [{}, {}] to absorb the "
                 "adapter (its weight is quantized: keep the adapter separate, or apply LoRA to "
                 "the full-precision model and merge there)",
                 base_layer()->name(), features_.out_features, features_.in_features);
  MANTISSA_CHECK(!merged_, "LoRALinear::merge", "the adapter is already merged");
  NoGradGuard no_grad;
  mantissa::detail::copy_unchecked(w, add(w.detach().to(kFloat64), delta_weight()));
  merged_ = true;
}

void LoRALinear::unmerge() {
  MANTISSA_CHECK(merged_, "LoRALinear::unmerge", "the adapter is not merged");
  Tensor w = mergeable_weight(*base_layer(), features_);
  MANTISSA_CHECK(w.defined(), "LoRALinear::unmerge",
                 "the base ({}) keeps no floating-point weight of shape [{}, {}] (was it replaced "
                 "since the merge?)",
                 base_layer()->name(), features_.out_features, features_.in_features);
  NoGradGuard no_grad;
  mantissa::detail::copy_unchecked(w, add(w.detach().to(kFloat64), delta_weight(), -1.0));
  merged_ = false;
}

// ---- applying and freezing ----

std::vector<std::string> merge_and_unload(Module& root) {
  // Checked first, so a refusal leaves every layer as it was.
  std::vector<std::string> refused;
  for (const auto& [q, m] : root.named_modules()) {
    const auto* lora = dynamic_cast<const LoRALinear*>(m);
    if (lora != nullptr && !q.empty() &&
        !mergeable_weight(*lora->base_layer(), lora->features()).defined())
      refused.push_back(fmt::format("{} ({})", q, lora->base_layer()->name()));
  }
  MANTISSA_CHECK(refused.empty(), "merge_and_unload",
                 "only bases that keep a floating-point weight (nn::Linear, an FP8 layer) can "
                 "absorb their adapters; these layers' weights are quantized: {} (a quantized "
                 "weight cannot take a float update: keep the adapters, or apply them to the "
                 "full-precision model and merge there)",
                 fmt::join(refused, ", "));
  std::vector<std::string> unloaded;
  replace_modules(
      root, [](const std::string&, Module& m) { return dynamic_cast<LoRALinear*>(&m) != nullptr; },
      [&](const std::string& name, std::shared_ptr<Module> old) {
        auto& lora = static_cast<LoRALinear&>(*old);
        if (!lora.merged()) lora.merge();
        unloaded.push_back(name);
        return lora.base_layer();
      });
  return unloaded;
}

int64_t mark_only_lora_as_trainable(Module& root, LoraBias bias) {
  // Biases of layers carrying an adapter: "<slot>.base_layer.bias".
  auto adapter_bias = [](const std::string& name) {
    const std::string suffix = "base_layer.bias";
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  auto is_bias = [](const std::string& name) {
    return name == "bias" || (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
  };
  for (const auto& [name, p] : root.named_parameters()) {
    bool train = is_adapter_name(name);
    if (bias == LoraBias::kAll && is_bias(name)) train = true;
    if (bias == LoraBias::kLoraOnly && adapter_bias(name)) train = true;
    Tensor(p).requires_grad_(train && p.is_floating_point());
  }
  return trainable_parameter_count(root);
}

StateDict lora_state_dict(const Module& root) {
  StateDict out;
  for (const auto& [name, t] : root.state_dict()) {
    if (is_adapter_name(name)) out.insert(name, t);
  }
  return out;
}

int64_t trainable_parameter_count(const Module& root) {
  int64_t n = 0;
  for (const Tensor& p : root.parameters()) {
    if (p.requires_grad()) n += p.numel();
  }
  return n;
}

}  // namespace mantissa::nn
