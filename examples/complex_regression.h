#pragma once
// A small complex-valued model for examples/complex_regression.cpp and its test: one
// nn::ComplexLinear (3 -> 4) learns a fixed complex affine map y = A x + b from real inputs,
// with the loss mean |y_pred - y|^2, trained by the Trainer with SGD. Under 64-true the
// layer is built in complex128 (Trainer::init_module / configure_model run in float64), under
// 32-true in complex64; the low-precision plugins refuse it (docs/complex.md).
#include <memory>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/nn/complex_linear.h"
#include "mantissa/ops/complex.h"
#include "mantissa/train/trainer.h"

namespace complex_example {

using namespace mantissa;

// The data: 64 real inputs x (64, 3) and complex targets A x + b, stored as real pairs
// (64, 4, 2) because a data set holds one tensor per field.
inline std::shared_ptr<data::TensorDataset> make_dataset(uint64_t seed = 7) {
  Generator gen(seed);
  const Tensor x = uniform({64, 3}, -1.0, 1.0, kFloat64, &gen);
  const Tensor a = complex(uniform({4, 3}, -1.0, 1.0, kFloat64, &gen),
                           uniform({4, 3}, -1.0, 1.0, kFloat64, &gen));
  const Tensor b =
      complex(uniform({4}, -0.5, 0.5, kFloat64, &gen), uniform({4}, -0.5, 0.5, kFloat64, &gen));
  const Tensor y = add(matmul(x, a.t()), b);  // (64, 4) complex128
  const Tensor pairs = stack({real(y), imag(y)}, -1);
  return std::make_shared<data::TensorDataset>(x.to(kFloat32), pairs.to(kFloat32));
}

class ComplexRegression : public train::TrainModule {
 public:
  ComplexRegression() : TrainModule("ComplexRegression") {}

  void configure_model() override {
    if (!fc_) fc_ = register_module("fc", std::make_shared<nn::ComplexLinear>(3, 4));
  }

  Tensor training_step(const data::Example& batch, int64_t) override {
    const Tensor target = complex(batch.target.select(-1, 0), batch.target.select(-1, 1));
    const Tensor err = abs(sub(fc_->forward(batch.input), target));  // |y_pred - y|, real
    Tensor loss = mean(mul(err, err));
    log("train_loss", loss.item());
    return loss;
  }

  train::OptimizerConfig configure_optimizers() override {
    train::OptimizerConfig c;
    c.optimizer = std::make_shared<optim::SGD>(parameters(), 0.2);
    return c;
  }

  std::shared_ptr<nn::ComplexLinear> fc_;
};

// Trains for `steps` optimizer steps in `precision`; returns the loss of every step.
inline std::vector<double> train(const std::string& precision, int64_t steps,
                                 DType* weight_dtype = nullptr) {
  train::TrainerOptions o;
  o.precision = precision;
  o.accelerator = "cpu";
  o.max_steps = steps;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  o.seed = 11;
  train::Trainer trainer(o);
  ComplexRegression module;
  {
    auto scope = trainer.init_module();  // 64-true: float64 default, so complex128 weights
    module.configure_model();
  }
  if (weight_dtype != nullptr) *weight_dtype = module.fc_->weight.dtype();
  data::DataLoader loader(make_dataset(), 16, /*shuffle=*/true);
  trainer.fit(module, loader);
  return trainer.step_losses();
}

}  // namespace complex_example
