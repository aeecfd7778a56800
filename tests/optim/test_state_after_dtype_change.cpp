// An optimizer whose parameters change dtype after some steps (Module::to, which converts the
// parameters in place; docs/guide.md): the state follows the parameters. The next step must
// equal that of a fresh optimizer over the converted parameters that loads the state saved
// before the conversion (load_state_dict casts it to the new state dtype), bit for bit.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"
#include "support/test_util.h"

namespace mantissa::optim {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

void set_grads(nn::Linear& layer, uint64_t seed) {
  Generator g(seed);
  for (Tensor& p : layer.parameters())
    p.set_grad(uniform(p.shape(), -1, 1, kFloat32, &g).to(p.dtype()));
}

// A 64 x 80 Linear in `from` (weights above the 8-bit optimizers' 4096-element threshold,
// 8-bit codes; a bias of 64 below it, 32-bit state) and its optimizer after two steps.
struct TwoSteps {
  std::unique_ptr<nn::Linear> layer;
  std::unique_ptr<Optimizer> opt;
};
TwoSteps two_steps(const MakeOptimizer& make, DType from) {
  manual_seed(3);
  TwoSteps t{std::make_unique<nn::Linear>(80, 64), nullptr};
  t.layer->to(from);
  t.opt = make(t.layer->parameters());
  for (uint64_t s = 0; s < 2; ++s) {
    set_grads(*t.layer, s);
    t.opt->step();
  }
  return t;
}

void expect_continues_after_conversion(const MakeOptimizer& make, DType from, DType to) {
  SCOPED_TRACE(std::string(from.name()) + " -> " + std::string(to.name()));
  TwoSteps run = two_steps(make, from);
  nn::Linear& layer = *run.layer;
  OptimizerState before = run.opt->state_dict();  // aliases CPU state: copied
  for (auto& [key, t] : before.tensors) t = t.clone();
  layer.to(to);
  set_grads(layer, 7);
  run.opt->step();  // crashed, corrupted the heap or gave NaN before the state followed

  // The reference: the converted parameters' values before that step, a fresh optimizer and
  // the state saved before the conversion.
  TwoSteps reference = two_steps(make, from);
  nn::Linear& ref = *reference.layer;
  ref.to(to);
  std::unique_ptr<Optimizer> fresh = make(ref.parameters());
  fresh->load_state_dict(before);
  set_grads(ref, 7);
  fresh->step();

  const auto got = layer.parameters(), want = ref.parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dtype(), to);
    const auto g = got[i].to_vector<double>(), w = want[i].to_vector<double>();
    for (size_t j = 0; j < g.size(); ++j) {
      ASSERT_TRUE(std::isfinite(g[j])) << "parameter " << i << " element " << j;
      ASSERT_EQ(g[j], w[j]) << "parameter " << i << " element " << j;
    }
  }
}

TEST(OptimizerStateAfterDtypeChange, AdamWSgdAndAdamW8bitFollowTheParameters) {
  const std::vector<std::pair<DType, DType>> conversions = {
      {kFloat32, kFloat64},  {kBFloat16, kFloat32}, {kFloat16, kFloat32},
      {kBFloat16, kFloat16}, {kFloat64, kFloat32},  {kFloat32, kBFloat16}};
  const MakeOptimizer adamw = [](std::vector<Tensor> ps) {
    return std::make_unique<AdamW>(std::move(ps), 1e-2);
  };
  const MakeOptimizer sgd = [](std::vector<Tensor> ps) {
    return std::make_unique<SGD>(std::move(ps), 0.1, 0.9);
  };
  const MakeOptimizer adamw8bit = [](std::vector<Tensor> ps) {
    Adam8bitOptions o;
    o.lr = 1e-2;
    return std::make_unique<AdamW8bit>(std::move(ps), o);
  };
  for (const auto& [from, to] : conversions) {
    {
      SCOPED_TRACE("AdamW");
      expect_continues_after_conversion(adamw, from, to);
    }
    {
      SCOPED_TRACE("SGD");
      expect_continues_after_conversion(sgd, from, to);
    }
    if (from != kFloat64 && to != kFloat64) {
      SCOPED_TRACE("AdamW8bit");
      expect_continues_after_conversion(adamw8bit, from, to);
    }
  }
}

// With master_weights, a parameter that stops being half drops its fp32 master (the parameter
// is fp32 itself), and one that becomes half gets a master from its current values.
TEST(OptimizerStateAfterDtypeChange, MasterWeightsFollowTheParameters) {
  manual_seed(5);
  nn::Linear layer(8, 4);
  layer.to(kBFloat16);
  AdamOptions o;
  o.lr = 1e-2;
  o.master_weights = true;
  AdamW opt(layer.parameters(), o);
  const Tensor w = layer.parameters()[0];
  set_grads(layer, 1);
  opt.step();
  ASSERT_EQ(opt.state(w)->buffers.count("master_param"), 1u);
  layer.to(kFloat32);
  set_grads(layer, 2);
  opt.step();
  EXPECT_EQ(opt.state(w)->buffers.count("master_param"), 0u);
  EXPECT_EQ(opt.state(w)->buffers.at("exp_avg").dtype(), kFloat32);
  layer.to(kFloat16);
  const std::vector<double> before = w.to_vector<double>();
  set_grads(layer, 3);
  opt.step();
  ASSERT_EQ(opt.state(w)->buffers.count("master_param"), 1u);
  const Tensor& master = opt.state(w)->buffers.at("master_param");
  EXPECT_EQ(master.dtype(), kFloat32);
  // The master started from the f16 values and took one step; the parameter is its rounding.
  EXPECT_EQ(master.to(kFloat16).to_vector<double>(), w.to_vector<double>());
  EXPECT_NE(w.to_vector<double>(), before);
}

}  // namespace
}  // namespace mantissa::optim
