#pragma once
// "transformer-engine" and "transformer-engine-float16": Lightning's TransformerEnginePrecision
// on the CPU (docs/fp8.md). Weights (and everything that is not an FP8 GEMM) are bfloat16 or
// float16; at setup every nn::Linear and 1-D nn::LayerNorm of the model becomes fp8::Linear /
// fp8::LayerNorm (keeping parameter names and tensors), unless the model already holds FP8
// layers or the layer's name is excluded; each training step runs inside an fp8 autocast with
// the plugin's recipe. As in Lightning there is no loss scaler, for float16 weights too: the
// gradient GEMMs get their range from the per-tensor E5M2 scale.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

struct TransformerEngineOptions {
  fp8::Recipe recipe;
  // Qualified module names ("head", "h0.mlp.fc2") left as they are.
  std::vector<std::string> exclude;
  // false: convert_module only casts the dtype (build with FP8 layers yourself).
  bool replace_layers = true;
  // Said once (warn_once) when convert_module leaves a layer in FP8: make_precision sets it
  // where the precision is emulated (train::emulation_warning), so a model that fp8_exclude
  // leaves without FP8 layers is told that instead of how FP8 is emulated.
  std::string emulation_warning;
};

// Per FP8 layer and role: the scale now and what the last interval's casts did.
struct Fp8RoleStats {
  float scale = 1.0f;
  // The amax the scale was computed from (fp8::ScalingState::scale_amax): under delayed scaling
  // scale = f32(fp8_max * 2^-margin) / amax, 0 while the scale is the starting or a loaded one;
  // under the other recipes the last cast's amax (rowwise: its largest row amax) and scale.
  float amax = 0.0f;
  // The largest max|x| * scale / fp8_max of the interval's casts (fp8::CastCounts::peak):
  // above 1, values saturated.
  double peak = 0.0;
  double saturated_fraction = 0.0;
  double flushed_fraction = 0.0;
  int64_t casts = 0;  // elements cast in the interval
};
using Fp8Stats = std::map<std::string, std::map<std::string, Fp8RoleStats>>;

class TransformerEnginePrecision : public Precision {
 public:
  // precision: "transformer-engine" (bfloat16 weights) or "transformer-engine-float16".
  explicit TransformerEnginePrecision(const std::string& precision,
                                      TransformerEngineOptions options = {});

  std::string precision() const override { return precision_; }
  std::string class_name() const override { return "TransformerEnginePrecision"; }
  DType param_dtype() const override { return dtype_; }
  const fp8::Recipe& recipe() const { return options_.recipe; }
  const std::vector<std::string>& exclude() const { return options_.exclude; }

  // Replaces the layers (see the file comment), then casts the module to the weights dtype.
  // Returns through replaced_layers() how many layers it swapped.
  void convert_module(nn::Module& module) override;
  int replaced_layers() const { return replaced_; }
  ScopePtr tensor_init_context() override;
  // Default dtype = weights dtype, then fp8 autocast with the recipe.
  ScopePtr forward_context() override;
  data::Example convert_input(const data::Example& batch) const override;
  // Throws when none of the FP8 layers ran since convert_module, warns naming those that did
  // not when some did (docs/trainer.md, "Swapped layers").
  void check_first_training_step() const override;

  // {"recipe": {...}, "fp8_meta": {layer: {"scale": [3], "amax_history": [[L x 3]]}}}, and under
  // nvfp4 "sr_stream": {"seed": s, "offset": o, "bits_per_element": 8} (fp8::nvfp4_sr_stream),
  // which a load restores. A stream without bits_per_element (written by a build that drew a
  // 32-bit word per element) loads with a warning that the draws from there on differ from that
  // build's; another value than 8 is refused.
  nlohmann::json state_dict() const override;
  // Restores the meta of every FP8 layer of the converted module (names must match) and
  // checks the recipe is the one in effect. Malformed entries and values no run writes (a
  // scale not finite and positive, a negative or NaN amax: fp8::check_scales,
  // fp8::check_amax_history) are refused naming the layer, before anything changes.
  void load_state_dict(const nlohmann::json& state) override;

  // Scales and saturated/flushed fractions since the last call, per layer and role
  // ("input", "weight", "grad_output"); resets the counts.
  Fp8Stats take_stats();

 private:
  std::vector<std::pair<std::string, std::shared_ptr<fp8::ScalingState>>> fp8_states() const;

  // Each FP8 layer's fp8_forwards() when convert_module finished, by qualified name.
  std::vector<std::pair<std::string, int64_t>> fp8_forwards_at_setup_;
  std::string precision_;
  DType dtype_;
  TransformerEngineOptions options_;
  nn::Module* module_ = nullptr;
  int replaced_ = 0;
};

// The options from string settings, as the CLI and the precision registry pass them:
// "fp8_recipe" (delayed|current|rowwise|rowwise-gw-hp|block|mxfp8|mxfp4|nvfp4), "fp8_format"
// (E4M3|HYBRID),
// "fp8_amax_history_len", "fp8_amax_compute_algo" (max|most_recent), "fp8_margin" (the last
// three: delayed only), "fp8_power_2_scales" (true|false; current and rowwise-gw-hp),
// "fp8_fp32_scales" (true|false; block), "fp8_disable_rht", "fp8_disable_stochastic_rounding",
// "fp8_disable_2d_quantization" (true|false; nvfp4), "fp8_enable_rht",
// "fp8_enable_stochastic_rounding" (true|false; mxfp4), "fp8_exclude" (comma-separated module
// names). Unknown keys and bad values throw naming the key. `given` names the keys the user set
// by hand (the --fp8-* flags given): a recipe refuses one it does not read even at its default
// value ("fp8_margin" "0" under current, fp8::Recipe::validate), where a value recorded in a
// checkpoint's hyperparameters passes.
TransformerEngineOptions transformer_engine_options_from(
    const std::map<std::string, std::string>& settings, const std::set<std::string>& given = {});

// A checkpoint holds each FP8 layer's state twice: as the module's tensors `<layer>.fp8_scale`
// and `<layer>.fp8_amax_history` (`model`, the file's model tensors without their "model."
// prefix), which are authoritative as TransformerEngine's module state is, and as the plugin's
// "fp8_meta" in `state`, which a resume restores too. Throws naming the layer, the two values
// and where they differ when a layer's copies disagree (a damaged or edited file would
// otherwise evaluate with one state and resume with the other), or when the copy is malformed
// or holds a value no run writes. Layers in one of the two alone are left to the name checks.
void check_fp8_meta_matches_tensors(const nlohmann::json& state, const nn::StateDict& model);

// {"layer": {"input": {"scale": .., "amax": .., "peak": .., "saturated_fraction": ..,
// "flushed_fraction": .., "casts": ..}, "weight": {..}, "grad_output": {..}}, ...} for metrics
// files and loggers.
nlohmann::json fp8_stats_json(const Fp8Stats& stats);

// The registry's factory: options.precision names the variant, options.extra holds the
// settings above.
std::unique_ptr<Precision> make_transformer_engine_precision(const PrecisionOptions& options);

// True when `module` or a descendant is an FP8 layer.
bool holds_fp8_layers(nn::Module& module);

// The names of `exclude` that name no module of `module` (in their order), those that name a
// module holding no layer that would run in FP8 (an embedding, a norm, a LoRA adapter: keeping
// them out changes nothing), and the names they could have meant: every module's qualified
// name, a module held in two slots under both (the user may name a shared layer by either), the
// root left out. Callers word the refusal for their own flags (check_fp8_exclude, finetune's
// --fp8-exclude).
struct Fp8ExcludeMatch {
  std::vector<std::string> unmatched;
  std::vector<std::string> idle;
  std::vector<std::string> names;
  // Up to five names `wanted` could have meant: the modules whose name ends in "." + wanted
  // (a short name such as q_proj), else the closest names by spelling.
  std::vector<std::string> candidates(const std::string& wanted) const;
};
Fp8ExcludeMatch match_fp8_exclude(nn::Module& module, const std::vector<std::string>& exclude);

// Throws when a name of `exclude` names no module of `module` (listing the closest names) or one
// holding no layer that would run in FP8, as convert_module does before it replaces anything;
// callers can check a model up front.
void check_fp8_exclude(nn::Module& module, const std::vector<std::string>& exclude);

}  // namespace mantissa::train
