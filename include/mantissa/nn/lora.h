#pragma once
// LoRA (Hu et al. 2021) adapters on Linear-like layers, laid out as Hugging Face peft lays
// them out, so adapter files and numbers carry over:
//
//   y = base(x) + lora_B(lora_A(dropout(x))) * (alpha / r)
//
// lora_A is Linear(in, r, bias=false) initialised like nn.Linear (kaiming-uniform with
// a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in))), lora_B is Linear(r, out, bias=false) set to
// zeros, so a fresh adapter leaves the model's output unchanged. The wrapped layer sits in the
// child slot "base_layer" (peft's name) with its weight frozen; the adapters are
// "<slot>.lora_A.weight" and "<slot>.lora_B.weight" (peft's adapter-file keys without the
// ".default" adapter name). The base can be any Module with a Linear's shape contract
// (nn::Linear, quant::Linear4bit, quant::Linear8bitLt): LoRA only calls its forward.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/nn/dropout.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

// The (in_features, out_features) of a layer that maps (..., in) to (..., out).
struct LinearFeatures {
  int64_t in_features = 0;
  int64_t out_features = 0;
};

// Recognises a Linear-like module type and returns its features, or nullopt for other types.
using LinearLikeFn = std::function<std::optional<LinearFeatures>(const Module&)>;
// Adds a recogniser (quantized layer families call this once; registering the same key again
// replaces the earlier one). nn::Linear is always recognised.
void register_linear_like(const std::string& key, LinearLikeFn recognise);
// Registers Layer (a type with in_features() and out_features()) under `key`, once a process
// however often it is called: what a layer family's constructors call, so that LoRA recognises
// the layer whether or not a precision plugin made it.
template <class Layer>
void register_linear_like_once(const std::string& key) {
  static const bool registered = [&key] {
    register_linear_like(key, [](const Module& m) -> std::optional<LinearFeatures> {
      if (const auto* l = dynamic_cast<const Layer*>(&m))
        return LinearFeatures{l->in_features(), l->out_features()};
      return std::nullopt;
    });
    return true;
  }();
  (void)registered;
}
// The features of m when some recogniser knows its type; nullopt otherwise.
std::optional<LinearFeatures> linear_features(const Module& m);

// The largest adapter scaling alpha / r accepted. peft takes any float, but beyond this one
// optimizer step moves a layer's output by orders of magnitude (the loss explodes), and far
// beyond it (alpha 1e30, r 8) the gradients' squares overflow Adam's second moment to inf, so
// the adapters' updates are 0 and the run silently trains nothing. Usual settings scale by 0.5
// to 64 (alpha 16, r 8: 2).
inline constexpr double kMaxLoraScaling = 1000;

struct LoraOptions {
  int64_t r = 8;       // adapter rank, >= 1
  double alpha = 8.0;  // scaling = alpha / r (peft's lora_alpha)
  double dropout = 0;  // on the adapter's input only, in [0, 1)
};
// Throws naming the bad value: r < 1, alpha not finite and positive or alpha / r above
// kMaxLoraScaling, dropout outside [0, 1).
void validate(const LoraOptions& options);

class LoRALinear : public Module {
 public:
  // Wraps `base` (frozen: its "weight" stops requiring grad). lora_A is drawn from `gen` (the
  // default generator when null); dropout masks come from `dropout_gen`. The adapters take the
  // dtype of the base's floating weight when it has one (fp32 otherwise).
  LoRALinear(std::shared_ptr<Module> base, LinearFeatures features, const LoraOptions& options,
             Generator* gen = nullptr, Generator* dropout_gen = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // Drops the FP8 scaling state ("lora_A.fp8_scale", "lora_A.fp8_amax_history", the same for
  // lora_B) of files written when the transformer-engine plugin made the adapters FP8 modules,
  // which never cast anything: an adapter that holds no such buffer loads those files.
  void upgrade_state_dict(const std::string& prefix, StateDict& state) const override;

  // Folds the adapter into the base's weight (W += scaling * B A) so forward costs one GEMM;
  // unmerge() subtracts it again. The base must keep a floating-point "weight" parameter of
  // shape [out, in]: nn::Linear, or an FP8 layer (whose weight stays in the weights dtype and is
  // cast to FP8 per product). Other bases throw: their weights are quantized. Merging twice, or
  // unmerging an unmerged layer, throws.
  void merge();
  void unmerge();
  bool merged() const { return merged_; }

  // The module in the "base_layer" slot (a precision plugin may have quantized it since).
  std::shared_ptr<Module> base_layer() const;
  // The adapters as built. forward calls the modules in the "lora_A" / "lora_B" slots, which
  // a precision plugin may have replaced since (the FP8 plugin puts fp8::Linear layers there,
  // sharing these weight tensors); child("lora_A") is the module that runs.
  const std::shared_ptr<Linear>& lora_A() const { return lora_A_; }
  const std::shared_ptr<Linear>& lora_B() const { return lora_B_; }
  double scaling() const { return scaling_; }
  int64_t rank() const { return options_.r; }
  const LinearFeatures& features() const { return features_; }

 private:
  // scaling * (B A) in the base weight's dtype (for merge/unmerge).
  Tensor delta_weight() const;
  // The "weight" parameter of the module in an adapter slot ("lora_A", "lora_B"), whatever
  // type a precision plugin put there.
  Tensor slot_weight(const std::string& slot) const;

  std::shared_ptr<Linear> lora_A_, lora_B_;
  std::shared_ptr<Dropout> dropout_;
  LinearFeatures features_;
  LoraOptions options_;
  double scaling_;
  bool merged_ = false;
};

// Which layers apply_lora wraps: every Linear-like module (see linear_features) whose
// qualified name matches the targets, or all of them when both are empty. As peft's
// target_modules, the targets are a list or one regular expression: a name matches the list
// when it equals an entry or ends in "." + entry ("fc1" matches "h0.mlp.fc1"), and the regex
// when the regex matches all of it (re.fullmatch: "h\d+\.mlp\.fc1" matches "h0.mlp.fc1",
// "fc1" does not). Layers already inside a LoRALinear are never wrapped again.
struct LoraConfig {
  int64_t r = 8;
  double alpha = 8.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules;  // empty: every Linear-like layer
  std::string target_regex;                 // peft's target_modules as a string; or the list
  Generator* gen = nullptr;                 // lora_A initialisation (default generator)
  Generator* dropout_gen = nullptr;         // dropout masks (default generator)
};

// Whether a layer's qualified name matches `config`'s targets (its target_regex compiled once,
// PCRE2 for Python's re). Throws when target_regex does not compile, or is given with
// target_modules.
std::function<bool(const std::string& name)> lora_target_matcher(const LoraConfig& config);

// The targets for messages: "[q_proj, v_proj]", or "'x' (a regular expression that a layer's
// whole name must match)".
std::string lora_targets_text(const LoraConfig& config);

// Wraps the matching layers of root in LoRALinear (replace_modules keeps the slot names) and
// returns the qualified names wrapped, in model order. Throws when the options fail validate()
// (r < 1, alpha not finite and positive or alpha / r too large, dropout outside [0, 1)) or
// nothing matched (naming the Linear-like layers the model has).
std::vector<std::string> apply_lora(Module& root, const LoraConfig& config);

// peft's merge_and_unload: folds the adapter of every LoRALinear under root into its base
// (merge(), unless already merged: nn::Linear or an FP8 layer) and puts the base back into the
// layer's slot, so the model has its layout and state-dict keys from before apply_lora
// ("fc1.weight", not "fc1.base_layer.weight") and no adapters: its state dict loads into the
// plain model. The base weights stay frozen, as LoRA left them. Throws, changing nothing, when a
// base keeps no floating-point weight (a quantized base cannot absorb a float update), naming
// those layers; root itself is never replaced. Returns the qualified names unloaded, in model
// order.
std::vector<std::string> merge_and_unload(Module& root);

// loralib's bias modes for mark_only_lora_as_trainable.
enum class LoraBias {
  kNone,      // only lora_A / lora_B train (peft's default)
  kAll,       // and every parameter named "bias"
  kLoraOnly,  // and the biases of the layers that carry an adapter
};
// Freezes every parameter of root except the adapters (and the biases `bias` selects).
// Returns the number of trainable parameter elements left.
int64_t mark_only_lora_as_trainable(Module& root, LoraBias bias = LoraBias::kNone);

// The adapter tensors only ("h0.mlp.fc1.lora_A.weight", ...), what peft's
// get_peft_model_state_dict saves (without the "base_model.model." prefix).
StateDict lora_state_dict(const Module& root);

// Elements of parameters that require grad (the metrics' trainable_parameters).
int64_t trainable_parameter_count(const Module& root);

}  // namespace mantissa::nn
