#pragma once
// The small regression the FP8 recipe tests train: an MLP 16-32-4 fitting a random linear
// teacher under TransformerEnginePrecision, 60 AdamW steps on fresh batches of 32. The recipes
// are compared on its losses (they converge, and they differ from one another).
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::fp8::testing_fixture {

inline Tensor normal_tensor(const Shape& shape, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = nd(rng);
  return tensor(v, shape);
}

// The loss of every step under the plugin's settings (e.g. {{"fp8_recipe", "current"}}).
inline std::vector<float> train_losses(const std::map<std::string, std::string>& settings) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  train::TransformerEnginePrecision te("transformer-engine",
                                       train::transformer_engine_options_from(settings));
  te.convert_module(*model);
  optim::AdamW opt(model->parameters(), 1e-2);
  const Tensor teacher = normal_tensor({4, 16}, 0.5f, 99);
  std::vector<float> losses;
  for (int step = 0; step < 60; ++step) {
    const Tensor x = normal_tensor({32, 16}, 1.0f, 1000 + static_cast<uint32_t>(step));
    const data::Example b = te.convert_input({x, matmul(x, teacher.t())});
    Tensor loss;
    {
      train::ScopePtr scope = te.forward_context();
      loss = mse_loss(model->forward(b.input).to(kFloat32), b.target.to(kFloat32));
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

// The mean loss of steps [from, to).
inline double mean_loss(const std::vector<float>& l, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += l[i];
  return s / static_cast<double>(to - from);
}

}  // namespace mantissa::fp8::testing_fixture
