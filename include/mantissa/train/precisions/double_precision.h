#pragma once
// "64-true": parameters, inputs and new layers in float64 (Lightning's DoublePrecision).
#include "mantissa/train/precision.h"

namespace mantissa::train {

class DoublePrecision : public Precision {
 public:
  std::string precision() const override { return "64-true"; }
  std::string class_name() const override { return "DoublePrecision"; }
  DType param_dtype() const override { return kFloat64; }
  void convert_module(nn::Module& module) override { module.to(kFloat64); }
  ScopePtr tensor_init_context() override { return default_dtype_scope(kFloat64); }
  ScopePtr forward_context() override { return default_dtype_scope(kFloat64); }
  // Floating inputs become float64; integer targets stay as they are.
  data::Example convert_input(const data::Example& batch) const override;
};

// "64-true"; options.extra must be empty.
std::unique_ptr<Precision> make_double_precision(const PrecisionOptions& options);

}  // namespace mantissa::train
