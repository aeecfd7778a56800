#pragma once
// "16-mixed" and "bf16-mixed" (Lightning's MixedPrecision, docs/trainer.md): float32
// parameters, steps under CPU autocast to float16/bfloat16. "16-mixed" owns a GradScaler and
// runs Lightning's step sequence: closure (training_step, zero_grad, backward of the scaled loss),
// unscale_ before the on_before_optimizer_step hooks and clipping, scaler.step and update; a
// skipped training_step neither steps nor updates the scale. "bf16-mixed" uses no scaler.
// Unlike Lightning (which switches CPU "16-mixed" to bf16), mantissa runs fp16 autocast on the
// CPU.
#include <memory>

#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

class MixedPrecision : public Precision {
 public:
  // precision: "16-mixed" or "bf16-mixed". "16-mixed" without a scaler creates one with the
  // default options; "bf16-mixed" with a scaler throws (bf16 has float32's range).
  // device_type: where the forward runs; autocast applies there (Lightning passes the
  // accelerator's device the same way).
  explicit MixedPrecision(const std::string& precision,
                          std::unique_ptr<amp::GradScaler> scaler = nullptr,
                          DeviceType device_type = DeviceType::kCPU);

  std::string precision() const override { return precision_; }
  std::string class_name() const override { return "MixedPrecision"; }
  DType autocast_dtype() const { return dtype_; }
  ScopePtr forward_context() override;
  Tensor pre_backward(const Tensor& loss) override;
  bool optimizer_step(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                      const std::function<void()>& after_closure) override;
  void clip_gradients(optim::Optimizer& optimizer, double clip_val,
                      GradClipAlgorithm algorithm) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  amp::GradScaler* scaler() override { return scaler_.get(); }
  // The scale and the steps skipped over the whole run: a resumed run counts those of the run
  // it resumes (saved as "skipped_steps" next to the GradScaler's own keys).
  std::optional<LossScaleState> loss_scale_state() override;

 private:
  std::string precision_;
  DType dtype_;
  DeviceType device_type_;
  std::unique_ptr<amp::GradScaler> scaler_;
  // Steps the checkpoint's run had skipped before this fit resumed it (GradScaler's state dict
  // keeps PyTorch's keys, which have no count).
  int64_t resumed_skipped_steps_ = 0;
};

// "16-mixed" (with a default GradScaler) or "bf16-mixed" (options.precision); options.extra
// must be empty.
std::unique_ptr<Precision> make_mixed_precision(const PrecisionOptions& options);

}  // namespace mantissa::train
