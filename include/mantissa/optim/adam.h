#pragma once
// Adam (L2 weight decay added to the gradient) with torch.optim.Adam's non-capturable update:
//   m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g^2,  (amsgrad: v_max = max(v_max, v))
//   p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
// AdamW (adamw.h) shares the loop and decays decoupled: p *= 1 - lr wd.
// f16/bf16 parameters compute in fp32 with their state in the parameter's dtype, as in
// torch.optim; the HalfPrecisionOptions fields below ask for fp32 master weights, fp32 state or
// stochastic rounding of the parameter instead (optimizer.h, docs/half_precision.md).
#include <utility>
#include <vector>

#include "mantissa/optim/optimizer.h"

namespace mantissa::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  // float16/bfloat16 parameters only; see HalfPrecisionOptions in optimizer.h.
  bool master_weights = false;       // fp32 master copy + fp32 state
  bool stochastic_rounding = false;  // unbiased rounding of the parameter (not with master)
  bool fp32_state = false;           // fp32 moments without a master copy
  uint64_t rounding_seed = 0;        // stochastic rounding's random stream
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
       double eps = 1e-8, double weight_decay = 0, bool amsgrad = false, bool maximize = false);
  Adam(std::vector<Tensor> params, const AdamOptions& options);

  // A new group; options default to the constructor's (copy defaults() and edit it).
  void add_param_group(std::vector<Tensor> params);
  void add_param_group(std::vector<Tensor> params, const AdamOptions& options);
  const AdamOptions& defaults() const { return defaults_; }
  const AdamOptions& options(size_t group) const;

  std::string_view name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  void step() override;
  double lr(size_t group = 0) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override;
  using Optimizer::set_lr;

 protected:
  // AdamW: weight decay is decoupled from the gradient.
  Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled);

  nlohmann::json group_options_json(size_t group) const override;
  void set_group_options_json(size_t group, const nlohmann::json& options) override;
  void check_loaded_state(size_t group, const ParamState& state) const override;
  HalfPrecisionOptions half_precision(size_t group) const override;

 private:
  void validate(const AdamOptions& o) const;

  bool decoupled_ = false;
  AdamOptions defaults_;
  std::vector<AdamOptions> options_;
};

}  // namespace mantissa::optim
