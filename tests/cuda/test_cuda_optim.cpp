// Optimizers, gradient clipping and the GradScaler on GPU tensors, against the same steps on
// the CPU with identical gradients. They skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/tensor.h"
#include "mantissa/nn/clip_grad.h"
#include "mantissa/optim/adam.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/optim/sgd.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::rel_error;

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {{1000}, {33, 7}, {1}, {3, 129}};
  return s;
}

std::vector<Tensor> make_params(DType dt, Device dev, uint32_t seed) {
  std::vector<Tensor> ps;
  for (const Shape& s : shapes()) {
    Tensor p = randn_cpu(s, seed++, 1.0, dt).to(dev);
    p.requires_grad_();
    ps.push_back(p);
  }
  return ps;
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Runs `steps` steps of the same optimizer on CPU and GPU copies of the parameters with the
// same gradients, then compares the parameters (and the state) with tolerance tol.
void compare_steps(DType dt, const MakeOpt& make, int steps, double tol, const std::string& what) {
  std::vector<Tensor> cpu = make_params(dt, kCPU, 11), gpu = make_params(dt, kGpu, 11);
  auto oc = make(cpu), og = make(gpu);
  uint32_t seed = 1000;
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      const Tensor g = randn_cpu(cpu[i].shape(), seed++, 0.5, dt);
      cpu[i].set_grad(g);
      gpu[i].set_grad(g.to(kGpu));
    }
    oc->step();
    og->step();
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_TRUE(gpu[i].is_cuda());
    EXPECT_LE(rel_error(gpu[i], cpu[i]), tol) << what << " param " << i;
    const optim::ParamState* sc = oc->state(cpu[i]);
    const optim::ParamState* sg = og->state(gpu[i]);
    ASSERT_TRUE(sc != nullptr && sg != nullptr);
    EXPECT_EQ(sg->step, sc->step) << what;
    for (const auto& [name, t] : sc->buffers) {
      ASSERT_TRUE(sg->buffers.count(name)) << what << " lacks " << name;
      const Tensor& tg = sg->buffers.at(name);
      EXPECT_TRUE(tg.is_cuda()) << what << " " << name << " is not on the GPU";
      EXPECT_EQ(tg.dtype(), t.dtype()) << what << " " << name;
      EXPECT_LE(rel_error(tg, t), tol) << what << " " << name << " of param " << i;
    }
  }
}

TEST(CudaOptim, AdamAndAdamWMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    for (int variant = 0; variant < 4; ++variant) {
      optim::AdamOptions o = optim::adamw_defaults();
      o.lr = 1e-2;
      o.amsgrad = variant & 1;
      o.maximize = variant & 2;
      compare_steps(
          dt, [&](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, o); }, 7, 1e-6,
          std::string("AdamW ") + std::string(dt.name()) + " variant " + std::to_string(variant));
      o.weight_decay = 0.1;  // Adam: L2 decay added to the gradient
      compare_steps(
          dt, [&](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, o); }, 7, 1e-6,
          std::string("Adam ") + std::string(dt.name()) + " variant " + std::to_string(variant));
    }
  }
}

TEST(CudaOptim, ManyParametersInMultiTensorLaunchesMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  // 90 parameters of sizes around the kernel's 2048-element blocks, in two groups with different
  // learning rates: several launches of up to 40 tensors, each block finding its tensor.
  const std::vector<int64_t> sizes = {1, 2047, 2048, 2049, 5000, 231, 100000, 3};
  for (DType dt : {kFloat32, kBFloat16}) {
    std::vector<Tensor> cpu, gpu;
    for (int i = 0; i < 90; ++i) {
      const Tensor h = randn_cpu({sizes[i % sizes.size()]}, 500 + i, 1.0, dt);
      cpu.push_back(h.clone().requires_grad_());
      gpu.push_back(h.to(kGpu).requires_grad_());
    }
    optim::AdamOptions o = optim::adamw_defaults();
    o.lr = 1e-2;
    o.master_weights = dt == kBFloat16;
    optim::AdamOptions o2 = o;
    o2.lr = 3e-3;
    o2.weight_decay = 0.05;
    auto split = [](const std::vector<Tensor>& ps, bool first) {
      return std::vector<Tensor>(first ? ps.begin() : ps.begin() + 50,
                                 first ? ps.begin() + 50 : ps.end());
    };
    optim::AdamW oc(split(cpu, true), o), og(split(gpu, true), o);
    oc.add_param_group(split(cpu, false), o2);
    og.add_param_group(split(gpu, false), o2);
    uint32_t seed = 9000;
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu.size(); ++i) {
        const Tensor g = randn_cpu(cpu[i].shape(), seed++, 0.5, dt);
        cpu[i].set_grad(g);
        gpu[i].set_grad(g.to(kGpu));
      }
      oc.step();
      og.step();
    }
    const double tol = dt == kBFloat16 ? 1e-2 : 1e-6;
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_LE(rel_error(gpu[i], cpu[i]), tol) << dt.name() << " param " << i;
  }
}

TEST(CudaOptim, HalfParametersMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kBFloat16, kFloat16}) {
    const double tol = dt == kBFloat16 ? 1e-2 : 2e-3;
    for (int mode = 0; mode < 3; ++mode) {  // half state, fp32 state, master weights
      optim::AdamOptions o = optim::adamw_defaults();
      o.lr = 1e-2;
      o.fp32_state = mode == 1;
      o.master_weights = mode == 2;
      compare_steps(
          dt, [&](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, o); }, 5, tol,
          std::string("AdamW ") + std::string(dt.name()) + " mode " + std::to_string(mode));
      optim::SGDOptions so;
      so.lr = 0.05;
      so.momentum = 0.9;
      so.weight_decay = 0.01;
      so.fp32_state = mode == 1;
      so.master_weights = mode == 2;
      compare_steps(
          dt, [&](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, so); }, 5, tol,
          std::string("SGD ") + std::string(dt.name()) + " mode " + std::to_string(mode));
    }
  }
}

TEST(CudaOptim, SgdMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  struct V {
    double momentum, dampening, weight_decay;
    bool nesterov, maximize;
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const V& v :
         {V{0, 0, 0, false, false}, V{0.9, 0, 0, false, false}, V{0.9, 0, 0.01, true, false},
          V{0.8, 0.1, 0.05, false, true}, V{0, 0, 0.1, false, false}}) {
      optim::SGDOptions o;
      o.lr = 0.05;
      o.momentum = v.momentum;
      o.dampening = v.dampening;
      o.weight_decay = v.weight_decay;
      o.nesterov = v.nesterov;
      o.maximize = v.maximize;
      compare_steps(
          dt, [&](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, o); }, 6, 1e-6,
          std::string("SGD ") + std::string(dt.name()) + " momentum " + std::to_string(v.momentum) +
              (v.nesterov ? " nesterov" : ""));
    }
  }
}

TEST(CudaOptim, StateDictGoesToTheCpuAndLoadsBackToTheGpu) {
  MANTISSA_REQUIRE_GPU();
  optim::AdamOptions o = optim::adamw_defaults();
  o.lr = 1e-2;
  o.amsgrad = true;
  std::vector<Tensor> a = make_params(kFloat32, kGpu, 5);
  optim::AdamW oa(a, o);
  uint32_t seed = 77;
  auto grads = [&](const std::vector<Tensor>& ps, uint32_t s) {
    for (const Tensor& p : ps) p.set_grad(randn_cpu(p.shape(), s++).to(kGpu));
  };
  for (int s = 0; s < 3; ++s) {
    grads(a, seed + 10 * s);
    oa.step();
  }
  const optim::OptimizerState sd = oa.state_dict();
  ASSERT_FALSE(sd.tensors.empty());
  for (const auto& [name, t] : sd.tensors) EXPECT_FALSE(t.is_cuda()) << name;

  // A second optimizer over copies of the parameters resumes from the saved state.
  std::vector<Tensor> b;
  for (const Tensor& p : a) {
    Tensor c = p.detach().clone();
    c.requires_grad_();
    b.push_back(c);
  }
  optim::AdamW ob(b, o);
  ob.load_state_dict(sd);
  for (size_t i = 0; i < b.size(); ++i) {
    const optim::ParamState* st = ob.state(b[i]);
    ASSERT_TRUE(st != nullptr);
    EXPECT_EQ(st->step, 3);
    for (const auto& [name, t] : st->buffers) EXPECT_TRUE(t.is_cuda()) << name;
  }
  for (int s = 3; s < 5; ++s) {
    grads(a, seed + 10 * s);
    grads(b, seed + 10 * s);
    oa.step();
    ob.step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(rel_error(b[i], a[i]), 0.0) << i;
}

TEST(CudaOptim, StochasticRoundingOnTheGpuIsRefusedBeforeAnyChange) {
  MANTISSA_REQUIRE_GPU();
  optim::AdamOptions o;
  o.stochastic_rounding = true;
  std::vector<Tensor> ps = make_params(kBFloat16, kGpu, 3);
  for (const Tensor& p : ps) p.set_grad(randn_cpu(p.shape(), 1, 1.0, kBFloat16).to(kGpu));
  optim::Adam opt(ps, o);
  const Tensor before = ps[0].cpu();
  try {
    opt.step();
    ADD_FAILURE() << "stochastic rounding ran on the GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stochastic_rounding"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rel_error(ps[0], before), 0.0);
  EXPECT_EQ(opt.state(ps[0])->step, 0);
}

// Every bit of a tensor's bytes, on the host.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.to(kCPU).contiguous();
  const auto* b = static_cast<const uint8_t*>(h.data_ptr());
  return std::vector<uint8_t>(b, b + h.nbytes());
}

TEST(CudaOptim, EightBitAdamWMatchesTheCpuBitForBit) {
  MANTISSA_REQUIRE_GPU();
  // 8-bit state with a partial last block (5000 = 19 x 256 + 136), 8-bit state over many
  // blocks, and the float32 state of a parameter below min_8bit_size (4096).
  const std::vector<Shape> sizes = {{5000}, {64, 300}, {1000}};
  std::vector<Tensor> cpu, gpu;
  for (size_t k = 0; k < sizes.size(); ++k) {
    cpu.push_back(randn_cpu(sizes[k], 40 + static_cast<uint32_t>(k)).requires_grad_(true));
    gpu.push_back(cpu.back().detach().to(kGpu).requires_grad_(true));
  }
  optim::Adam8bitOptions o = optim::adamw8bit_defaults();
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  optim::AdamW8bit oc(cpu, o), og(gpu, o);
  uint32_t seed = 900;
  for (int step = 0; step < 6; ++step) {
    for (size_t k = 0; k < cpu.size(); ++k) {
      const Tensor g = randn_cpu(sizes[k], seed++, step == 3 ? 1e-3 : 0.5);
      cpu[k].set_grad(g);
      gpu[k].set_grad(g.to(kGpu));
    }
    oc.step();
    og.step();
  }
  for (size_t k = 0; k < cpu.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(bytes_of(gpu[k]), bytes_of(cpu[k]));
    const auto& bc = oc.state(cpu[k])->buffers;
    const auto& bg = og.state(gpu[k])->buffers;
    ASSERT_EQ(bc.size(), bg.size());
    for (const auto& [name, t] : bc) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(bg.count(name));
      EXPECT_TRUE(bg.at(name).is_cuda());
      EXPECT_EQ(bytes_of(bg.at(name)), bytes_of(t));
    }
  }
  EXPECT_TRUE(og.state(gpu[0])->buffers.count("state1"));
  EXPECT_TRUE(og.state(gpu[2])->buffers.count("exp_avg"));
}

TEST(CudaOptim, EightBitAdamRefusesANonFiniteGpuGradientAndHalfParameters) {
  MANTISSA_REQUIRE_GPU();
  Tensor p = randn_cpu({5000}, 7).to(kGpu).requires_grad_(true);
  optim::Adam8bit opt({p}, optim::Adam8bitOptions{});
  std::vector<double> g(5000, 0.25);
  g[4321] = std::numeric_limits<double>::quiet_NaN();
  p.set_grad(tensor_of(g, {5000}, kFloat32).to(kGpu));
  const std::vector<uint8_t> before = bytes_of(p);
  try {
    opt.step();
    FAIL() << "a NaN gradient was accepted";
  } catch (const optim::NonFiniteGradient& e) {
    EXPECT_NE(std::string(e.what()).find("element 4321"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_of(p), before);
  EXPECT_TRUE(opt.state(p) == nullptr || opt.state(p)->step == 0);

  Tensor h = randn_cpu({5000}, 8, 1.0, kBFloat16).to(kGpu).requires_grad_(true);
  optim::Adam8bit half_opt({h}, optim::Adam8bitOptions{});
  h.set_grad(randn_cpu({5000}, 9, 1.0, kBFloat16).to(kGpu));
  try {
    half_opt.step();
    FAIL() << "a bfloat16 GPU parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32 parameters and gradients"), std::string::npos)
        << e.what();
  }
}

TEST(CudaClipGrad, NormAndClippingMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    for (double norm_type : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
      std::vector<Tensor> cpu = make_params(dt, kCPU, 21), gpu = make_params(dt, kGpu, 21);
      for (size_t i = 0; i < cpu.size(); ++i) {
        const Tensor g = randn_cpu(cpu[i].shape(), 300 + i, 2.0, dt);
        cpu[i].set_grad(g);
        gpu[i].set_grad(g.to(kGpu));
      }
      const Tensor nc = nn::utils::clip_grad_norm_(cpu, 1.0, norm_type);
      const Tensor ng = nn::utils::clip_grad_norm_(gpu, 1.0, norm_type);
      EXPECT_EQ(ng.dtype(), nc.dtype());
      EXPECT_NEAR(ng.item(), nc.item(), 1e-6 * std::abs(nc.item()))
          << dt.name() << " norm " << norm_type;
      for (size_t i = 0; i < cpu.size(); ++i)
        EXPECT_LE(rel_error(gpu[i].grad(), cpu[i].grad()), dt == kBFloat16 ? 1e-2 : 1e-6)
            << dt.name() << " norm " << norm_type << " grad " << i;
    }
  }
}

TEST(CudaClipGrad, NonFiniteNormAndUnsupportedNormTypes) {
  MANTISSA_REQUIRE_GPU();
  std::vector<Tensor> gpu = make_params(kFloat32, kGpu, 31);
  std::vector<double> g(7 * 33, 1.0);
  g[5] = std::numeric_limits<double>::quiet_NaN();
  for (const Tensor& p : gpu) p.set_grad(randn_cpu(p.shape(), 9).to(kGpu));
  gpu[1].set_grad(tensor_of(g, {33, 7}, kFloat32).to(kGpu));
  EXPECT_TRUE(std::isnan(nn::utils::get_total_norm({gpu[0].grad(), gpu[1].grad()}).item()));
  EXPECT_THROW(nn::utils::clip_grad_norm_(gpu, 1.0, 2.0, /*error_if_nonfinite=*/true), Error);
  try {
    nn::utils::clip_grad_norm_(gpu, 1.0, 3.0);
    ADD_FAILURE() << "norm_type 3 ran on the GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not supported for gradients on a GPU"), std::string::npos)
        << e.what();
  }
}

// The scaler's scale is made by a first scale() call; a CPU tensor keeps these tests free of
// GPU element-wise kernels.
amp::GradScaler started_scaler() {
  amp::GradScaler scaler;  // init_scale 2^16
  (void)scaler.scale(scalar_tensor(1.0, kFloat32));
  return scaler;
}

TEST(CudaGradScaler, FiniteGradsAreUnscaledExactlyAndTheStepRuns) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kBFloat16}) {
    amp::GradScaler scaler = started_scaler();
    std::vector<Tensor> ps = make_params(dt, kGpu, 41);
    std::vector<Tensor> want;
    for (size_t i = 0; i < ps.size(); ++i) {
      const Tensor g = randn_cpu(ps[i].shape(), 50 + i, 1.0, dt);
      want.push_back(g);
      // g * 2^16: exact in every dtype here, and so is its unscaling by 2^-16.
      const std::vector<double> v = g.to_vector<double>();
      std::vector<double> scaled(v.size());
      for (size_t k = 0; k < v.size(); ++k) scaled[k] = v[k] * 65536.0;
      ps[i].set_grad(tensor_of(scaled, ps[i].shape(), dt).to(kGpu));
    }
    optim::SGD opt(ps, 0.1);
    const Tensor before = ps[0].cpu();
    scaler.unscale_(opt);
    const Tensor flag = scaler.found_inf(opt);
    ASSERT_TRUE(flag.defined());
    EXPECT_TRUE(flag.is_cuda()) << "the flag stays on the GPU until step() reads it";
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_EQ(rel_error(ps[i].grad(), want[i]), 0.0) << dt.name() << " grad " << i;
    EXPECT_TRUE(scaler.step(opt));
    EXPECT_GT(rel_error(ps[0], before), 0.0) << "the step did not run";
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 65536.0);
    EXPECT_EQ(scaler.get_growth_tracker(), 1);
    EXPECT_EQ(scaler.skipped_steps(), 0);
  }
}

TEST(CudaGradScaler, AnInfSkipsTheStepAndBacksOffTheScale) {
  MANTISSA_REQUIRE_GPU();
  for (double bad :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    amp::GradScaler scaler = started_scaler();
    std::vector<Tensor> ps = make_params(kFloat32, kGpu, 61);
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].set_grad(randn_cpu(ps[i].shape(), 70 + i).to(kGpu));
    std::vector<double> g(3 * 129, 0.25);
    g[200] = bad;
    ps[3].set_grad(tensor_of(g, {3, 129}, kFloat32).to(kGpu));
    optim::AdamW opt(ps, 1e-2);
    std::vector<Tensor> before;
    for (const Tensor& p : ps) before.push_back(p.cpu());
    EXPECT_FALSE(scaler.step(opt));
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(rel_error(ps[i], before[i]), 0.0) << i;
    EXPECT_EQ(opt.state(ps[0])->step, 0);
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 32768.0);
    EXPECT_EQ(scaler.get_growth_tracker(), 0);
    EXPECT_EQ(scaler.skipped_steps(), 1);
    // The finite elements were unscaled all the same (0.25 * 2^-16).
    const std::vector<double> back = ps[3].grad().to_vector<double>();
    EXPECT_EQ(back[0], 0.25 / 65536.0);
  }
}

}  // namespace
}  // namespace mantissa
