// True half precision (bf16-true / 16-true): updates smaller than half an ulp are lost with
// plain half parameters; fp32 master weights and stochastic rounding bring them back. Also the
// memory each policy costs (counting allocator), master-weight bookkeeping and state dicts.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include "mantissa/core/allocator.h"
#include "mantissa/nn/linear.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/sgd.h"

namespace mantissa::optim {
namespace {

enum class Policy { kPlain, kMaster, kStochastic, kStochasticFp32State };

template <class O>
O with_policy(O o, Policy policy, uint64_t seed = 7) {
  o.master_weights = policy == Policy::kMaster;
  o.stochastic_rounding = policy == Policy::kStochastic || policy == Policy::kStochasticFp32State;
  o.fp32_state = policy == Policy::kStochasticFp32State;
  o.rounding_seed = seed;
  return o;
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, Policy)>;

MakeOpt sgd_maker(double lr) {
  return [=](std::vector<Tensor> ps, Policy policy) {
    SGDOptions o;
    o.lr = lr;
    return std::make_unique<SGD>(std::move(ps), with_policy(o, policy));
  };
}

// AdamW with its default weight decay (0.01): with a constant gradient each step moves a weight
// by about lr (Adam's normalised step) plus lr * 0.01 * weight.
MakeOpt adamw_maker(double lr) {
  return [=](std::vector<Tensor> ps, Policy policy) {
    AdamOptions o = adamw_defaults();
    o.lr = lr;
    return std::make_unique<AdamW>(std::move(ps), with_policy(o, policy));
  };
}

double round_to(double x, DType dt) { return tensor_of({x}, {1}, dt).item(); }

// n weights of 1.0 in `dt`, gradient 1 at every step; `after_step(step, p, opt)` inspects them.
void run_constant_gradient(const MakeOpt& make, Policy policy, DType dt, int64_t n, int steps,
                           const std::function<void(int, const Tensor&, Optimizer&)>& after_step) {
  Tensor p = ones({n}, dt);
  p.requires_grad_(true);
  auto opt = make({p}, policy);
  for (int s = 1; s <= steps; ++s) {
    p.set_grad(ones({n}, dt));
    opt->step();
    after_step(s, p, *opt);
  }
}

// The fp32 run the half runs are measured against: one float32 weight, same optimizer.
std::vector<double> fp32_trajectory(const MakeOpt& make, int steps) {
  std::vector<double> out;
  run_constant_gradient(make, Policy::kPlain, kFloat32, 1, steps,
                        [&](int, const Tensor& p, Optimizer&) { out.push_back(p.item()); });
  return out;
}

struct LostUpdateCase {
  const char* name;
  MakeOpt make;
  DType dtype;
  double lr;
};

// Each update (about lr) is below half the spacing of the format just under 1.0: bf16 has
// 2^-8 there (half: 0.00195 > 1e-3), f16 2^-11 (half: 0.000244 > 1e-4).
std::vector<LostUpdateCase> lost_update_cases() {
  return {{"SGD bf16", sgd_maker(1e-3), kBFloat16, 1e-3},
          {"AdamW bf16", adamw_maker(1e-3), kBFloat16, 1e-3},
          {"SGD f16", sgd_maker(1e-4), kFloat16, 1e-4},
          {"AdamW f16", adamw_maker(1e-4), kFloat16, 1e-4}};
}

constexpr int kSteps = 100;

TEST(OptimHalfPrecision, PlainHalfUpdatesBelowHalfAnUlpAreLost) {
  for (const auto& c : lost_update_cases()) {
    SCOPED_TRACE(c.name);
    const auto ref = fp32_trajectory(c.make, kSteps);
    // The fp32 run moves by about 100 lr (AdamW's decay adds ~1% more).
    EXPECT_NEAR(ref.back(), 1 - kSteps * c.lr, 0.02 * kSteps * c.lr);
    run_constant_gradient(c.make, Policy::kPlain, c.dtype, 64, kSteps,
                          [&](int s, const Tensor& p, Optimizer&) {
                            for (double v : p.to_vector<double>()) ASSERT_EQ(v, 1.0) << s;
                          });
  }
}

// With master weights the fp32 copy follows the float32 run bit for bit (same arithmetic,
// fp32 state) and the parameter is its round-to-nearest value at every step.
TEST(OptimHalfPrecision, MasterWeightsKeepSmallUpdates) {
  for (const auto& c : lost_update_cases()) {
    SCOPED_TRACE(c.name);
    const auto ref = fp32_trajectory(c.make, kSteps);
    Tensor last;
    run_constant_gradient(c.make, Policy::kMaster, c.dtype, 64, kSteps,
                          [&](int s, const Tensor& p, Optimizer& opt) {
                            const Tensor& master = opt.state(p)->buffers.at("master_param");
                            ASSERT_EQ(master.dtype(), kFloat32);
                            for (double v : master.to_vector<double>()) ASSERT_EQ(v, ref[s - 1]);
                            const double rounded = round_to(ref[s - 1], c.dtype);
                            for (double v : p.to_vector<double>()) ASSERT_EQ(v, rounded) << s;
                            last = p;
                          });
    if (c.dtype == kBFloat16 && std::string(c.name) == "SGD bf16")
      EXPECT_EQ(last.to_vector<double>()[0], 0.8984375);  // bf16(0.9000...)
    EXPECT_NE(last.to_vector<double>()[0], 1.0);
  }
}

// With stochastic rounding each weight is a random walk on the half grid whose expectation is
// the fp32 run: the mean of n = 4096 independent weights stays within 6 standard errors of it
// at every step. One step adds at most (ulp/2)^2 of variance per weight, so after s steps the
// standard error is at most sqrt(s) * ulp / 2 / 64, with ulp = 2^-8 (bf16) or 2^-11 (f16) below
// 1 (a conservative bound: the observed worst deviation over all steps is 1.4 of it). With fp32
// state (llm.c's recipe) the expectation is the fp32 run itself. With the moments in the half
// dtype (the default) AdamW's step size is itself rounded, which biases the walk slightly
// (observed up to 3 standard errors): 2% of the distance moved is allowed on top for it.
TEST(OptimHalfPrecision, StochasticRoundingTracksTheFp32RunOnAverage) {
  const int64_t n = 4096;
  for (Policy policy : {Policy::kStochastic, Policy::kStochasticFp32State}) {
    for (const auto& c : lost_update_cases()) {
      SCOPED_TRACE(::testing::Message()
                   << c.name << " fp32 state " << (policy == Policy::kStochasticFp32State));
      const auto ref = fp32_trajectory(c.make, kSteps);
      const double ulp = c.dtype == kBFloat16 ? 0x1p-8 : 0x1p-11;
      std::set<double> distinct;
      run_constant_gradient(c.make, policy, c.dtype, n, kSteps,
                            [&](int s, const Tensor& p, Optimizer&) {
                              const auto v = p.to_vector<double>();
                              double mean = 0;
                              for (double x : v) mean += x / n;
                              const double se = std::sqrt(double(s)) * ulp / 2 / std::sqrt(n);
                              const double moved = 1 - ref[s - 1];
                              const double bias = policy == Policy::kStochastic ? 0.02 * moved : 0;
                              ASSERT_NEAR(mean, ref[s - 1], 6 * se + bias) << s;
                              if (s == kSteps) distinct.insert(v.begin(), v.end());
                            });
      EXPECT_GE(distinct.size(), 2u);  // the weights really walk apart
    }
  }
}

// The random bits depend on (seed, parameter, step, element) only: the same seed gives the same
// weights with 1 or 2 threads (a parameter above the parallel grain), another seed does not.
TEST(OptimHalfPrecision, StochasticRoundingIsDeterministicAcrossThreadCounts) {
  const int64_t n = 40003;
  auto run = [&](int threads, uint64_t seed) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor p = ones({n}, kBFloat16);
    p.requires_grad_(true);
    AdamOptions o = adamw_defaults();
    o.lr = 1e-3;
    AdamW opt({p}, with_policy(o, Policy::kStochastic, seed));
    for (int s = 0; s < 3; ++s) {
      p.set_grad(full({n}, 0.5, kBFloat16));
      opt.step();
    }
    omp_set_num_threads(saved);
    return p.to_vector<double>();
  };
  const auto one = run(1, 11);
  EXPECT_EQ(run(2, 11), one);
  EXPECT_NE(run(2, 12), one);
}

// Bytes held by a Linear(1024, 1024) model's parameters plus AdamW's state after one step,
// counted by the allocator (gradients excluded: they are allocated before the optimizer).
struct Footprint {
  int64_t params = 0;
  int64_t optimizer = 0;  // master copies + state
};

Footprint linear_adamw_footprint(DType dtype, Policy policy) {
  const int64_t before = memory_allocated();
  Generator gen(0);
  nn::Linear model(1024, 1024, /*with_bias=*/true, dtype, &gen);
  Footprint f;
  f.params = memory_allocated() - before;
  for (const Tensor& p : model.parameters()) p.set_grad(ones(p.shape(), dtype));
  const int64_t with_grads = memory_allocated();
  AdamW opt(model.parameters(), with_policy(adamw_defaults(), policy));
  opt.step();
  f.optimizer = memory_allocated() - with_grads;
  return f;
}

TEST(OptimHalfPrecision, MemoryBf16HalvesParamsAndAdamWState) {
  const int64_t n = 1024 * 1024 + 1024;  // weight + bias
  const Footprint f32 = linear_adamw_footprint(kFloat32, Policy::kPlain);
  const Footprint bf16 = linear_adamw_footprint(kBFloat16, Policy::kPlain);
  const Footprint master = linear_adamw_footprint(kBFloat16, Policy::kMaster);
  EXPECT_EQ(f32.params, 4 * n);
  EXPECT_EQ(f32.optimizer, 8 * n);  // exp_avg + exp_avg_sq in fp32
  EXPECT_EQ(bf16.params, 2 * n);
  EXPECT_EQ(bf16.optimizer, 4 * n);  // both moments in bf16, as torch.optim keeps them
  EXPECT_EQ(2 * (bf16.params + bf16.optimizer), f32.params + f32.optimizer);
  // Master weights: 4 bytes per parameter for the fp32 copy, and the moments in fp32.
  EXPECT_EQ(master.params, 2 * n);
  EXPECT_EQ(master.optimizer, 4 * n + 8 * n);
  // A bf16 model trained with master weights holds 14 bytes per parameter against fp32's 12.
  EXPECT_EQ(master.params + master.optimizer, 14 * n);
}

TEST(OptimHalfPrecision, MasterIsCreatedAtConstructionAndFollowsExternalWrites) {
  Tensor p = tensor_of({1.0, -2.0, 3.0}, {3}, kBFloat16);
  p.requires_grad_(true);
  SGDOptions o;
  o.lr = 0.5;
  SGD opt({p}, with_policy(o, Policy::kMaster));
  const Tensor& master = opt.state(p)->buffers.at("master_param");
  EXPECT_EQ(master.to_vector<double>(), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(opt.state(p)->step, 0);
  // Weights loaded into the model after the optimizer was built: the step starts from them
  // (a stale master would silently revert them).
  p.detach().copy_(tensor_of({10.0, -2.0, 30.0}, {3}, kFloat32));
  p.set_grad(tensor_of({1.0, 1.0, 1.0}, {3}, kBFloat16));
  opt.step();
  EXPECT_EQ(opt.state(p)->buffers.at("master_param").to_vector<double>(),
            (std::vector<double>{9.5, -2.5, 29.5}));
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{9.5, -2.5, 29.5}));
}

// State dicts: the master travels as "state.<i>.master_param"; an optimizer keeps its own
// layout (master_weights, fp32_state) when loading one saved under another policy.
TEST(OptimHalfPrecision, StateDictsConvertBetweenPolicies) {
  auto make = [](Policy policy) {
    Tensor p = tensor_of({1.0, 2.0}, {2}, kBFloat16);
    p.requires_grad_(true);
    AdamOptions o = adamw_defaults();
    o.lr = 1e-3;
    auto opt = std::make_unique<AdamW>(std::vector<Tensor>{p}, with_policy(o, policy));
    p.set_grad(tensor_of({0.5, -0.25}, {2}, kBFloat16));
    opt->step();
    return std::make_pair(p, std::move(opt));
  };
  auto [pm, master_opt] = make(Policy::kMaster);
  auto [pp, plain_opt] = make(Policy::kPlain);
  const OptimizerState with_master = master_opt->state_dict();
  EXPECT_EQ(with_master.tensors.count("state.0.master_param"), 1u);
  EXPECT_EQ(with_master.tensors.at("state.0.exp_avg").dtype(), kFloat32);
  EXPECT_EQ(with_master.meta["param_groups"][0]["master_weights"], true);
  const OptimizerState plain = plain_opt->state_dict();
  EXPECT_EQ(plain.tensors.count("state.0.master_param"), 0u);
  EXPECT_EQ(plain.tensors.at("state.0.exp_avg").dtype(), kBFloat16);

  // Master dict into a plain optimizer: moments rounded to bf16, master dropped.
  auto [p1, o1] = make(Policy::kPlain);
  o1->load_state_dict(with_master);
  EXPECT_EQ(o1->state(p1)->buffers.count("master_param"), 0u);
  EXPECT_EQ(o1->state(p1)->buffers.at("exp_avg").dtype(), kBFloat16);
  EXPECT_EQ(o1->state(p1)->buffers.at("exp_avg").to_vector<double>(),
            with_master.tensors.at("state.0.exp_avg").to(kBFloat16).to_vector<double>());
  EXPECT_EQ(o1->state_dict().meta["param_groups"][0]["master_weights"], false);

  // Plain dict into a master optimizer: moments widened, master taken from the parameter.
  auto [p2, o2] = make(Policy::kMaster);
  p2.detach().copy_(tensor_of({4.0, 5.0}, {2}, kFloat32));
  o2->load_state_dict(plain);
  EXPECT_EQ(o2->state(p2)->buffers.at("exp_avg").dtype(), kFloat32);
  EXPECT_EQ(o2->state(p2)->buffers.at("master_param").to_vector<double>(),
            (std::vector<double>{4, 5}));
  EXPECT_EQ(o2->state(p2)->step, 1);
}

TEST(OptimHalfPrecision, ContradictoryOptionsAreErrors) {
  Tensor p = ones({2}, kBFloat16);
  p.requires_grad_(true);
  SGDOptions s;
  s.lr = 0.1;
  s.master_weights = true;
  s.stochastic_rounding = true;
  try {
    SGD opt({p}, s);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("master_weights and stochastic_rounding"),
              std::string::npos)
        << e.what();
  }
  AdamOptions a = adamw_defaults();
  a.master_weights = true;
  a.stochastic_rounding = true;
  EXPECT_THROW(AdamW({p}, a), Error);

  // Loading a dict that turns stochastic rounding on in a master-weights optimizer fails and
  // leaves the optimizer as it was.
  a.stochastic_rounding = false;
  AdamW opt({p}, a);
  OptimizerState sd = opt.state_dict();
  sd.meta["param_groups"][0]["stochastic_rounding"] = true;
  sd.meta["param_groups"][0]["lr"] = 0.5;
  EXPECT_THROW(opt.load_state_dict(sd), Error);
  EXPECT_EQ(opt.lr(), a.lr);
  EXPECT_FALSE(opt.options(0).stochastic_rounding);
}

}  // namespace
}  // namespace mantissa::optim
