#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, with
// torch.optim.SGD's update (the first step copies the gradient into the momentum buffer).
// Like torch, SGD keeps no step count, except for half parameters with stochastic_rounding,
// whose random stream is keyed by the step (saved as the state's "step").
#include <vector>

#include "mantissa/optim/optimizer.h"

namespace mantissa::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  // float16/bfloat16 parameters only; see HalfPrecisionOptions in optimizer.h.
  bool master_weights = false;       // fp32 master copy + fp32 momentum buffer
  bool stochastic_rounding = false;  // unbiased rounding of the parameter (not with master)
  bool fp32_state = false;           // fp32 momentum buffer without a master copy
  uint64_t rounding_seed = 0;        // stochastic rounding's random stream
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double dampening = 0,
      double weight_decay = 0, bool nesterov = false, bool maximize = false);
  SGD(std::vector<Tensor> params, const SGDOptions& options);

  // A new group; options default to the constructor's (copy defaults() and edit it).
  void add_param_group(std::vector<Tensor> params);
  void add_param_group(std::vector<Tensor> params, const SGDOptions& options);
  const SGDOptions& defaults() const { return defaults_; }
  const SGDOptions& options(size_t group) const;

  std::string_view name() const override { return "SGD"; }
  void step() override;
  double lr(size_t group = 0) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override;
  using Optimizer::set_lr;

 protected:
  nlohmann::json group_options_json(size_t group) const override;
  void set_group_options_json(size_t group, const nlohmann::json& options) override;
  void check_loaded_state(size_t group, const ParamState& state) const override;
  HalfPrecisionOptions half_precision(size_t group) const override;

 private:
  SGDOptions defaults_;
  std::vector<SGDOptions> options_;
};

}  // namespace mantissa::optim
