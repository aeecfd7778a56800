#pragma once
// "16-mixed" with amp_backend="apex" (Lightning 1.x's `Trainer(precision=16,
// amp_backend="apex", amp_level="O2")`): NVIDIA Apex's four optimisation levels, reproduced on
// the CPU (docs/precision.md, "Apex optimisation levels"):
//
//   level  model weights   master weights     BatchNorm   forward            loss scaling
//   O0     fp32            -                  fp32        fp32               none (1.0)
//   O1     fp32            -                  fp32        autocast (fp16)    dynamic
//   O2     fp16            fp32 (this plugin) fp32        fp16 inputs/ops    dynamic
//   O3     fp16            -                  fp16        fp16 inputs/ops    none (1.0)
//
// keep_batchnorm_fp32, master_weights and loss_scale ("dynamic" or a number) override a
// level's defaults, as amp.initialize's keyword arguments do. O1 is the native "16-mixed"
// (autocast + GradScaler). For O2 the plugin owns the fp32 master copy of every fp16
// parameter, as Apex does: at each step the fp16 gradients are copied to fp32 and unscaled
// there, the optimizer steps the fp32 masters (its state is fp32), and the fp16 weights are
// the masters rounded. The dynamic scaler is Apex's: start at 2^16, halve and skip the step on
// inf/NaN gradients, double after 2000 clean steps.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "mantissa/train/precision.h"
#include "mantissa/train/precisions/mixed_precision.h"

namespace mantissa::train {

enum class ApexOptLevel { kO0, kO1, kO2, kO3 };
// "O0".."O3"; anything else throws listing the four.
ApexOptLevel apex_opt_level_from_string(const std::string& level);
const char* apex_opt_level_name(ApexOptLevel level);

struct ApexAmpOptions {
  ApexOptLevel level = ApexOptLevel::kO2;   // Lightning 1.x's default amp_level
  std::optional<bool> keep_batchnorm_fp32;  // level default: O2 true, O3 false
  std::optional<bool> master_weights;       // level default: O2 true, else false
  // "dynamic", a positive number (static scale), or unset: O1/O2 dynamic, O0/O3 1.0.
  std::optional<std::string> loss_scale;
};

class ApexAmpPrecision : public Precision {
 public:
  explicit ApexAmpPrecision(ApexAmpOptions options = {});

  std::string precision() const override { return "16-mixed"; }
  std::string class_name() const override { return "ApexMixedPrecision"; }
  DType param_dtype() const override { return casts_model_ ? kFloat16 : kFloat32; }
  ApexOptLevel level() const { return options_.level; }
  bool keep_batchnorm_fp32() const { return keep_bn_fp32_; }
  bool uses_master_weights() const { return master_weights_; }
  // 1.0 when the level does not scale; the current scale when dynamic.
  double loss_scale() const;
  bool dynamic_loss_scale() const { return dynamic_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  // The fp32 master copy of an fp16 parameter (O2), or an undefined tensor.
  Tensor master_of(const Tensor& param) const;

  void convert_module(nn::Module& module) override;
  ScopePtr forward_context() override;
  data::Example convert_input(const data::Example& batch) const override;
  // O2/O3: floating outputs come back as float32 (Apex's default cast_model_outputs), so the
  // loss is computed in fp32; O0/O1 leave them alone.
  Tensor convert_output(const Tensor& output) const override;
  Tensor pre_backward(const Tensor& loss) override;
  bool optimizer_step(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                      const std::function<void()>& after_closure) override;
  void clip_gradients(optim::Optimizer& optimizer, double clip_val,
                      GradClipAlgorithm algorithm) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  amp::GradScaler* scaler() override { return o1_ ? o1_->scaler() : nullptr; }
  std::optional<LossScaleState> loss_scale_state() override;

 private:
  bool step_fp16(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                 const std::function<void()>& after_closure);

  ApexAmpOptions options_;
  bool casts_model_ = false;
  bool keep_bn_fp32_ = false;
  bool master_weights_ = false;
  bool dynamic_ = false;
  double scale_ = 1.0;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  std::unique_ptr<MixedPrecision> o1_;  // O1 is the native 16-mixed
  struct Master {
    Tensor param;   // the fp16 parameter
    Tensor master;  // its fp32 copy, what the optimizer updates
  };
  std::unordered_map<const TensorImpl*, Master> masters_;
  bool resync_masters_ = false;  // after load_state_dict: weights came from a checkpoint
};

// The plugin from PrecisionOptions::extra: "amp_level" (O0..O3, default O2),
// "keep_batchnorm_fp32" and "master_weights" ("true"/"false"), "loss_scale".
std::unique_ptr<Precision> make_apex_amp_precision(const PrecisionOptions& options);

// The warning printed (once) when amp_backend="apex" is chosen: the native backend is
// recommended, as Lightning 1.9 said when it deprecated its Apex integration.
std::string apex_deprecation_warning();

}  // namespace mantissa::train
