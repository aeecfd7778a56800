#include "mantissa/train/precisions/mixed_precision.h"

#include "mantissa/amp/autocast.h"
#include "mantissa/core/error.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::train {
namespace {

class AutocastScope : public PrecisionScope {
 public:
  AutocastScope(DeviceType device, DType dtype) : region_(device, dtype) {}

 private:
  amp::autocast region_;
};

}  // namespace

MixedPrecision::MixedPrecision(const std::string& precision,
                               std::unique_ptr<amp::GradScaler> scaler, DeviceType device_type)
    : precision_(precision), device_type_(device_type), scaler_(std::move(scaler)) {
  MANTISSA_CHECK(precision == "16-mixed" || precision == "bf16-mixed", "MixedPrecision",
                 "Passed `MixedPrecision(precision='{}')`. Precision must be '16-mixed' or "
                 "'bf16-mixed'.",
                 precision);
  if (precision == "bf16-mixed") {
    MANTISSA_CHECK(scaler_ == nullptr, "MixedPrecision",
                   "`precision='bf16-mixed'` does not use a scaler, found a GradScaler (scale "
                   "{})",
                   scaler_->get_scale());
    dtype_ = kBFloat16;
  } else {
    dtype_ = kFloat16;
    if (!scaler_) scaler_ = std::make_unique<amp::GradScaler>();
  }
}

ScopePtr MixedPrecision::forward_context() {
  return std::make_unique<AutocastScope>(device_type_, dtype_);
}

Tensor MixedPrecision::pre_backward(const Tensor& loss) {
  return scaler_ ? scaler_->scale(loss) : loss;
}

bool MixedPrecision::optimizer_step(optim::Optimizer& optimizer,
                                    const std::function<Tensor()>& closure,
                                    const std::function<void()>& after_closure) {
  if (!scaler_) return Precision::optimizer_step(optimizer, closure, after_closure);
  const Tensor loss = closure();
  const bool skip = !loss.defined();
  // Unscale before the hooks and clipping so both see true gradients (docs/trainer.md,
  // MixedPrecision::optimizer_step step 3).
  // (Manual optimisation may have unscaled already, to clip: TrainModule::clip_gradients.)
  if (!skip && !optimizer.step_supports_amp_scaling() &&
      scaler_->stage(optimizer) == amp::OptState::kReady) {
    scaler_->unscale_(optimizer);
  }
  after_closure();
  if (skip) return false;  // no update(): nothing was scaled this iteration
  const bool stepped = scaler_->step(optimizer);
  scaler_->update();
  return stepped;
}

void MixedPrecision::clip_gradients(optim::Optimizer& optimizer, double clip_val,
                                    GradClipAlgorithm algorithm) {
  if (clip_val > 0 && scaler_ && optimizer.step_supports_amp_scaling()) {
    fail("MixedPrecision",
         "The current optimizer, {}, does not allow for gradient clipping because it performs "
         "unscaling of gradients internally. HINT: Are you using a 'fused' optimizer?",
         optimizer.name());
  }
  Precision::clip_gradients(optimizer, clip_val, algorithm);
}

nlohmann::json MixedPrecision::state_dict() const {
  if (!scaler_) return nlohmann::json::object();
  nlohmann::json state = scaler_->state_dict();
  // Without it a resumed run's metrics (skipped_steps, the epoch lines) counted only the steps
  // skipped since the resume, though they describe the whole run.
  if (!state.empty()) state["skipped_steps"] = resumed_skipped_steps_ + scaler_->skipped_steps();
  return state;
}

void MixedPrecision::load_state_dict(const nlohmann::json& state) {
  if (!scaler_) return;
  int64_t skipped = 0;
  nlohmann::json scaler_state = state;
  if (state.is_object() && state.contains("skipped_steps")) {  // absent in older checkpoints
    const nlohmann::json& v = state.at("skipped_steps");
    MANTISSA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, "MixedPrecision",
                   "state dict key 'skipped_steps' must be a non-negative integer, got {}",
                   io::json_excerpt(v));
    skipped = v.get<int64_t>();
    scaler_state.erase("skipped_steps");
  }
  scaler_->load_state_dict(scaler_state);  // throws before anything below changes
  resumed_skipped_steps_ = skipped - scaler_->skipped_steps();
}

std::optional<Precision::LossScaleState> MixedPrecision::loss_scale_state() {
  if (!scaler_) return std::nullopt;
  return LossScaleState{scaler_->get_scale(), resumed_skipped_steps_ + scaler_->skipped_steps()};
}

std::unique_ptr<Precision> make_mixed_precision(const PrecisionOptions& options) {
  check_precision_options(options);
  return std::make_unique<MixedPrecision>(
      options.precision, nullptr,
      options.accelerator == "gpu" ? DeviceType::kCUDA : DeviceType::kCPU);
}

}  // namespace mantissa::train
