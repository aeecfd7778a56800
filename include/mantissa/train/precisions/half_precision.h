#pragma once
// "16-true" and "bf16-true" (Lightning's HalfPrecision, docs/trainer.md): parameters,
// gradients and inputs in float16/bfloat16, no loss scaler. Parameters created inside
// Trainer::init_module() are born in the half dtype (no float32 copy ever exists).
#include "mantissa/train/precision.h"

namespace mantissa::train {

class HalfPrecision : public Precision {
 public:
  // "16-true" or "bf16-true"; anything else throws.
  explicit HalfPrecision(const std::string& precision);

  std::string precision() const override { return precision_; }
  std::string class_name() const override { return "HalfPrecision"; }
  DType param_dtype() const override { return dtype_; }
  void convert_module(nn::Module& module) override { module.to(dtype_); }
  ScopePtr tensor_init_context() override { return default_dtype_scope(dtype_); }
  ScopePtr forward_context() override { return default_dtype_scope(dtype_); }
  // Floating tensors of the batch become the half dtype; integer targets stay.
  data::Example convert_input(const data::Example& batch) const override;

 private:
  std::string precision_;
  DType dtype_;
};

// "16-true" or "bf16-true" (options.precision); options.extra must be empty.
std::unique_ptr<Precision> make_half_precision(const PrecisionOptions& options);

}  // namespace mantissa::train
