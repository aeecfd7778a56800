#pragma once
// AdamW (torch.optim.AdamW): Adam with decoupled weight decay, p *= 1 - lr * weight_decay
// before the Adam update; weight_decay defaults to 0.01.
#include "mantissa/optim/adam.h"

namespace mantissa::optim {

// AdamW's defaults differ from Adam's only in weight_decay.
inline AdamOptions adamw_defaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  return o;
}

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3,
        std::pair<double, double> betas = {0.9, 0.999}, double eps = 1e-8,
        double weight_decay = 1e-2, bool amsgrad = false, bool maximize = false)
      : Adam(std::move(params), AdamOptions{lr, betas, eps, weight_decay, amsgrad, maximize},
             /*decoupled=*/true) {}
  // Uses options.weight_decay as given (AdamOptions defaults it to 0, as Adam does): start
  // from adamw_defaults() for AdamW's 0.01.
  AdamW(std::vector<Tensor> params, const AdamOptions& options)
      : Adam(std::move(params), options, /*decoupled=*/true) {}
};

}  // namespace mantissa::optim
