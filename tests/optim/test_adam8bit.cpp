// Adam8bit / AdamW8bit: bit-exact against an independent float32 implementation of the same
// update (scripts/make_adam8bit_fixture.py), close to bitsandbytes' CPU Adam8bit, one step
// against double precision, the AVX2 kernel against the scalar one, the small-parameter
// fallback, overrides, state size, checkpoint round trip and bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "kernels/cpu/quant/code_index_table.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"
#include "optim/adam8bit_fixture.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;
namespace fx = adam8bit_fixture;
namespace kq = mantissa::kernels::quant;
namespace ko = mantissa::kernels::optim;

// The fixture script's input recipe: ((s >> 8) * 2^-24) * 2 - 1, s = s * 1664525 + 1013904223.
std::vector<float> lcg_floats(uint32_t seed, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  uint32_t s = seed;
  for (auto& x : out) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) * 0x1p-24f * 2.0f - 1.0f;
  }
  return out;
}

std::vector<float> fixture_grad(int step) {
  std::vector<float> g = lcg_floats(100 + step, fx::kNumel);
  const float scales[5] = {1.0f, 0.1f, 0.01f, 1e-3f, 1e-4f};
  for (int64_t i = 0; i < fx::kNumel; ++i) g[i] = g[i] * scales[(i / 256 + step) % 5];
  return g;
}

Tensor from_floats(const std::vector<float>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, kFloat32);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor make_param(const std::vector<float>& v) {
  Tensor t = from_floats(v);
  t.set_requires_grad(true);
  return t;
}

void set_grad(Tensor& p, const std::vector<float>& g) { p.set_grad(from_floats(g)); }

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// A tensor's values as floats (any floating dtype).
std::vector<float> vals_f(const Tensor& t) {
  const Tensor f = t.detach().to(kFloat32);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

struct Snapshot {
  std::vector<float> p;
  std::vector<uint8_t> q1, q2;
  std::vector<float> a1, a2;
};

Snapshot snapshot(const optim::Optimizer& opt, const Tensor& p) {
  const optim::ParamState* st = opt.state(p);
  Snapshot s;
  s.p.assign(p.data<float>(), p.data<float>() + p.numel());
  const auto& b = st->buffers;
  s.q1.assign(b.at("state1").data<uint8_t>(), b.at("state1").data<uint8_t>() + p.numel());
  s.q2.assign(b.at("state2").data<uint8_t>(), b.at("state2").data<uint8_t>() + p.numel());
  const int64_t nb = b.at("absmax1").numel();
  s.a1.assign(b.at("absmax1").data<float>(), b.at("absmax1").data<float>() + nb);
  s.a2.assign(b.at("absmax2").data<float>(), b.at("absmax2").data<float>() + nb);
  return s;
}

// Runs the fixture's five steps; snapshots after steps 1 and 5.
std::pair<Snapshot, Snapshot> run_fixture(bool adamw) {
  Tensor p = make_param(lcg_floats(1, fx::kNumel));
  optim::Adam8bitOptions o;
  if (adamw) {
    o.lr = 2e-2;
    o.betas = {0.8, 0.99};
    o.eps = 1e-6;
    o.weight_decay = 0.1;
  } else {
    o.lr = 1e-2;
  }
  std::unique_ptr<optim::Adam8bit> opt;
  if (adamw)
    opt = std::make_unique<optim::AdamW8bit>(std::vector<Tensor>{p}, o);
  else
    opt = std::make_unique<optim::Adam8bit>(std::vector<Tensor>{p}, o);
  Snapshot first, last;
  for (int t = 1; t <= fx::kSteps; ++t) {
    set_grad(p, fixture_grad(t));
    opt->step();
    if (t == 1) first = snapshot(*opt, p);
  }
  last = snapshot(*opt, p);
  return {first, last};
}

template <size_t N, size_t M>
void expect_exact(const Snapshot& s, const uint32_t (&p)[N], const uint8_t (&q1)[M],
                  const uint8_t (&q2)[M], const char* what) {
  int bad = 0;
  for (size_t k = 0; k < N; ++k) {
    const size_t i = k * fx::kStride;
    if (bits(s.p[i]) != p[k] || s.q1[i] != q1[k] || s.q2[i] != q2[k]) {
      if (++bad <= 5)
        ADD_FAILURE() << what << " element " << i << ": p " << s.p[i] << " vs "
                      << std::bit_cast<float>(p[k]) << ", q1 " << int(s.q1[i]) << " vs "
                      << int(q1[k]) << ", q2 " << int(s.q2[i]) << " vs " << int(q2[k]);
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

template <size_t B>
void expect_absmax(const std::vector<float>& got, const uint32_t (&want)[B]) {
  ASSERT_EQ(got.size(), B);
  for (size_t b = 0; b < B; ++b) EXPECT_EQ(bits(got[b]), want[b]) << "block " << b;
}

TEST(Adam8bit, MatchesTheFloat32ReferenceBitForBit) {
  auto [first, last] = run_fixture(false);
  expect_exact(first, fx::kAdamMantissaStep1Param, fx::kAdamMantissaStep1State1,
               fx::kAdamMantissaStep1State2, "step 1");
  expect_exact(last, fx::kAdamMantissaStep5Param, fx::kAdamMantissaStep5State1,
               fx::kAdamMantissaStep5State2, "step 5");
  expect_absmax(last.a1, fx::kAdamMantissaStep5Absmax1);
  expect_absmax(last.a2, fx::kAdamMantissaStep5Absmax2);
}

TEST(Adam8bit, AdamWMatchesTheFloat32ReferenceBitForBit) {
  auto [first, last] = run_fixture(true);
  expect_exact(first, fx::kAdamWMantissaStep1Param, fx::kAdamWMantissaStep1State1,
               fx::kAdamWMantissaStep1State2, "step 1");
  expect_exact(last, fx::kAdamWMantissaStep5Param, fx::kAdamWMantissaStep5State1,
               fx::kAdamWMantissaStep5State2, "step 5");
  expect_absmax(last.a1, fx::kAdamWMantissaStep5Absmax1);
  expect_absmax(last.a2, fx::kAdamWMantissaStep5Absmax2);
}

// bitsandbytes' CPU backend differs on purpose in three places (docs/optimizers.md): decay
// before the step, a 65,536-bin table instead of the exact nearest entry (coarse near zero),
// no sign fix. The trajectories must still agree closely.
template <size_t N, size_t M, size_t B>
void expect_close_to_bnb(const Snapshot& s, const uint32_t (&p)[N], const uint8_t (&q1)[M],
                         const uint8_t (&q2)[M], const uint32_t (&a1)[B], double lr) {
  const std::vector<float> p0 = lcg_floats(1, fx::kNumel);
  double moved_diff = 0, moved = 0;
  int far = 0, q1_same = 0, q2_same = 0;
  for (size_t k = 0; k < N; ++k) {
    const size_t i = k * fx::kStride;
    const double ours = s.p[i] - p0[i], theirs = std::bit_cast<float>(p[k]) - p0[i];
    moved_diff += std::fabs(ours - theirs);
    moved += std::fabs(theirs);
    far += std::fabs(ours - theirs) > 0.03 * lr;
    q1_same += s.q1[i] == q1[k];
    q2_same += s.q2[i] == q2[k];
  }
  EXPECT_LT(moved_diff / moved, 0.01);
  EXPECT_LE(far, static_cast<int>(N / 50)) << "elements off by more than 0.03 lr";
  EXPECT_GE(q1_same, static_cast<int>(N * 0.98));
  EXPECT_GE(q2_same, static_cast<int>(N * 0.95));
  for (size_t b = 0; b < B; ++b)
    EXPECT_NEAR(s.a1[b], std::bit_cast<float>(a1[b]), 1e-3 * std::bit_cast<float>(a1[b]));
}

TEST(Adam8bit, StaysCloseToBitsandbytesCpuAdam8bit) {
  auto [first, last] = run_fixture(false);
  expect_close_to_bnb(last, fx::kAdamBnbStep5Param, fx::kAdamBnbStep5State1,
                      fx::kAdamBnbStep5State2, fx::kAdamBnbStep5Absmax1, 1e-2);
}

TEST(Adam8bit, StaysCloseToBitsandbytesCpuAdamW8bit) {
  auto [first, last] = run_fixture(true);
  expect_close_to_bnb(last, fx::kAdamWBnbStep5Param, fx::kAdamWBnbStep5State1,
                      fx::kAdamWBnbStep5State2, fx::kAdamWBnbStep5Absmax1, 2e-2);
}

TEST(Adam8bit, FirstStepMatchesDoublePrecision) {
  // From zero state the parameter update uses the unquantized fp32 moments, so it equals the
  // double-precision Adam step to fp32 rounding; the codes are the nearest entries of m and v.
  const int64_t n = 1000;
  const std::vector<float> p0 = lcg_floats(7, n), g = lcg_floats(8, n);
  Tensor p = make_param(p0);
  optim::AdamW8bit opt({p}, [] {
    optim::Adam8bitOptions o = optim::adamw8bit_defaults();
    o.min_8bit_size = 0;
    return o;
  }());
  set_grad(p, g);
  opt.step();
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
  std::vector<double> m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = (1 - b1) * g[i];
    v[i] = (1 - b2) * double(g[i]) * g[i];
    const double mhat = m[i] / (1 - b1), vhat = v[i] / (1 - b2);
    const double want = (p0[i] - lr * mhat / (std::sqrt(vhat) + eps)) * (1 - lr * wd);
    EXPECT_NEAR(p.data<float>()[i], want, 4e-7 * std::max(1.0, std::fabs(want))) << i;
  }
  const Snapshot s = snapshot(opt, p);
  int code_mismatch = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / 256;
    double a1 = 0, a2 = 0;
    for (int64_t j = b * 256; j < std::min(n, b * 256 + 256); ++j) {
      a1 = std::max(a1, std::fabs(m[j]));
      a2 = std::max(a2, v[j]);
    }
    EXPECT_NEAR(s.a1[b], a1, 1e-6 * a1);
    int want1 = kq::nearest_code_index(kq::dynamic_map_signed(), static_cast<float>(m[i] / a1));
    if (std::signbit(kq::dynamic_map_signed()[want1]) != std::signbit(m[i]))
      want1 += m[i] > 0 ? 1 : -1;
    const int want2 =
        kq::nearest_code_index(kq::dynamic_map_unsigned(), static_cast<float>(v[i] / a2));
    code_mismatch += (s.q1[i] != want1) + (s.q2[i] != want2);
  }
  // Only values within float rounding of a midpoint may land on the other neighbour.
  EXPECT_LE(code_mismatch, 3);
}

TEST(Adam8bit, IndexTablesAreExactForBothMaps) {
  for (const float* code : {kq::dynamic_map_signed(), kq::dynamic_map_unsigned()}) {
    kq::CodeIndexTable t;
    t.build(code);
    ASSERT_TRUE(t.exact);
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 1e-30f, -1e-30f};
    for (int i = 0; i + 1 < 256; ++i) {
      const float mid = 0.5f * (code[i] + code[i + 1]);
      for (float x : {mid, std::nextafter(mid, 2.0f), std::nextafter(mid, -2.0f), code[i]})
        xs.push_back(x);
    }
    for (uint32_t k = 0; k < (1u << 22); ++k) {  // a sweep of |x| < 2 of both signs
      xs.push_back(std::bit_cast<float>((k << 8) & 0x3fffffffu));
      xs.push_back(-std::bit_cast<float>((k << 8) & 0x3fffffffu));
    }
    for (float x : xs) ASSERT_EQ(t.index(x), kq::nearest_code_index(code, x)) << x;
  }
}

TEST(Adam8bit, Avx2KernelEqualsScalarBitForBit) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  for (int64_t n : {256, 255, 8, 13, 1}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> p = lcg_floats(trial * 31 + n, n), g = lcg_floats(trial * 17 + 5, n);
      if (trial % 5 == 1) std::fill(g.begin(), g.end(), 0.0f);  // zero block
      for (int64_t i = 0; i < n; i += 3) g[i] *= 1e-6f;
      std::vector<uint8_t> q1(n), q2(n);
      for (int64_t i = 0; i < n; ++i) {
        q1[i] = static_cast<uint8_t>((i * 37 + trial) % 256);
        q2[i] = static_cast<uint8_t>((i * 11 + trial) % 256);
      }
      float a1 = trial % 5 == 1 ? 0.0f : 0.05f * trial, a2 = trial % 5 == 1 ? 0.0f : 1e-4f * trial;
      ko::Adam8bitScalars s{0.9f, 0.1f, 0.999f, 0.001f, -1e-3f, 1e-8f, 0.9999f, trial % 2 == 0};
      auto p2 = p;
      auto q1b = q1, q2b = q2;
      float a1b = a1, a2b = a2;
      ko::adam8bit_block_scalar(s, maps, p.data(), g.data(), q1.data(), q2.data(), &a1, &a2, n);
      ko::adam8bit_block_avx2(s, maps, p2.data(), g.data(), q1b.data(), q2b.data(), &a1b, &a2b, n);
      EXPECT_EQ(bits(a1), bits(a1b));
      EXPECT_EQ(bits(a2), bits(a2b));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits(p[i]), bits(p2[i])) << n << " " << trial << " " << i;
        ASSERT_EQ(q1[i], q1b[i]) << n << " " << trial << " " << i;
        ASSERT_EQ(q2[i], q2b[i]) << n << " " << trial << " " << i;
      }
      // The fp32-state span kernels too.
      std::vector<float> pm = lcg_floats(trial, n), m = lcg_floats(trial + 1, n), v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = m[i] * m[i];
      auto pm2 = pm, m2 = m, v2 = v;
      ko::adam32_span_scalar(s, pm.data(), g.data(), m.data(), v.data(), n);
      ko::adam32_span_avx2(s, pm2.data(), g.data(), m2.data(), v2.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits(pm[i]), bits(pm2[i]));
        ASSERT_EQ(bits(m[i]), bits(m2[i]));
        ASSERT_EQ(bits(v[i]), bits(v2[i]));
      }
    }
  }
}

TEST(Adam8bit, SmallParametersKeepFp32State) {
  Tensor small = make_param(lcg_floats(1, 4095));
  Tensor big = make_param(lcg_floats(2, 4096));
  optim::Adam8bit opt({small, big});
  EXPECT_FALSE(opt.uses_8bit_state(small));
  EXPECT_TRUE(opt.uses_8bit_state(big));
  set_grad(small, lcg_floats(3, 4095));
  set_grad(big, lcg_floats(4, 4096));
  opt.step();
  EXPECT_TRUE(opt.state(small)->buffers.count("exp_avg"));
  EXPECT_EQ(opt.state(small)->buffers.at("exp_avg").dtype(), kFloat32);
  EXPECT_FALSE(opt.state(small)->buffers.count("state1"));
  EXPECT_EQ(opt.state(big)->buffers.at("state1").dtype(), kUInt8);
  EXPECT_EQ(opt.state(big)->buffers.at("absmax1").numel(), 16);
  // The 32-bit path is plain Adam: compare one step with double precision.
  const std::vector<float> p0 = lcg_floats(1, 4095), g = lcg_floats(3, 4095);
  for (int64_t i = 0; i < 4095; ++i) {
    const double want = p0[i] - 1e-3 * g[i] / (std::fabs(double(g[i])) + 1e-8);
    EXPECT_NEAR(small.data<float>()[i], want, 4e-7) << i;
  }
}

TEST(Adam8bit, StateIsAboutTwoBytesPerParameter) {
  const int64_t n = 1 << 20;
  Tensor p = make_param(std::vector<float>(n, 0.5f));
  optim::Adam8bit opt({p});
  set_grad(p, std::vector<float>(n, 0.1f));
  opt.step();
  const double per_param = static_cast<double>(opt.state_bytes()) / n;
  EXPECT_DOUBLE_EQ(per_param, 2.0 + 8.0 / 256.0);
  EXPECT_LE(per_param, 2.05);
  optim::Adam fp32({p});
  fp32.step();
  EXPECT_DOUBLE_EQ(static_cast<double>(fp32.state_bytes()) / n, 8.0);
}

TEST(Adam8bit, OverrideKeeps32BitStateAndIsSaved) {
  Tensor a = make_param(lcg_floats(1, 5000));
  Tensor b = make_param(lcg_floats(2, 5000));
  optim::Adam8bit opt({a, b});
  opt.override_config(a, "optim_bits", 32);
  EXPECT_FALSE(opt.uses_8bit_state(a));
  EXPECT_TRUE(opt.uses_8bit_state(b));
  set_grad(a, lcg_floats(3, 5000));
  set_grad(b, lcg_floats(4, 5000));
  opt.step();
  EXPECT_TRUE(opt.state(a)->buffers.count("exp_avg"));
  EXPECT_TRUE(opt.state(b)->buffers.count("state1"));
  EXPECT_EQ(opt.state_dict().meta["param_groups"][0]["optim_bits"]["0"], 32);
  expect_error([&] { opt.override_config(b, "optim_bits", 32); },
               {"already has 8-bit state", "before its first step"});
  expect_error([&] { opt.override_config(b, "lr", 1); }, "'optim_bits'");
  expect_error([&] { opt.override_config(b, "optim_bits", 4); }, "8 or 32");
  Tensor stranger = make_param({1.0f});
  expect_error([&] { opt.override_config(stranger, "optim_bits", 32); }, "not optimized");
}

TEST(Adam8bit, OverridesByNameAndForEmbeddings) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Embedding>(100, 64));
  model->push_back(std::make_shared<nn::Linear>(64, 128));
  optim::Adam8bit opt(model->parameters());
  const auto emb = optim::keep_embeddings_32bit(opt, *model);
  ASSERT_EQ(emb.size(), 1u);
  EXPECT_EQ(emb[0], "0.weight");
  EXPECT_FALSE(opt.uses_8bit_state(model->parameters()[0]));
  EXPECT_TRUE(opt.uses_8bit_state(model->parameters()[1]));
  const auto named = optim::override_optim_bits(opt, *model, {"1.weight"});
  ASSERT_EQ(named.size(), 1u);
  EXPECT_FALSE(opt.uses_8bit_state(model->parameters()[1]));
  expect_error([&] { optim::override_optim_bits(opt, *model, {"1.wieght"}); },
               {"no parameter name contains '1.wieght'", "closest names: 1.weight"});
}

// The names suggested for a substring that matches nothing are ranked by how close it comes to a
// part of each name, not to the whole (short names won over the one meant).
TEST(Adam8bit, OverrideSuggestionsRankByTheClosestPartOfAName) {
  struct TwoLayers : nn::Module {
    TwoLayers() : nn::Module("TwoLayers") {
      register_module("fc", std::make_shared<nn::Linear>(64, 64));
      register_module("lm_head", std::make_shared<nn::Linear>(64, 100));
    }
  } model;
  optim::Adam8bit opt(model.parameters());
  expect_error([&] { optim::override_optim_bits(opt, model, {"lm_haed"}); },
               {"closest names: lm_head.weight, lm_head.bias, "});
}

// Frozen parameters (a LoRA model's base weights) have no optimizer state: the suggestions
// for a name that matches nothing list trainable parameters only (they led with the frozen
// "0.weight" for "0.wieght"), and a name matching only frozen ones says so (it failed with
// "the parameter (shape [32, 64]) is not optimized by this optimizer").
TEST(Adam8bit, OverrideSuggestionsAndMatchesAreTrainableParametersOnly) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(64, 32));
  model->push_back(std::make_shared<nn::Linear>(32, 16));
  for (Tensor p : model->at<nn::Linear>(0)->parameters()) p.requires_grad_(false);
  std::vector<Tensor> trainable;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  optim::Adam8bit opt(trainable);
  const std::string missed =
      error_of([&] { optim::override_optim_bits(opt, *model, {"0.wieght"}); });
  EXPECT_NE(missed.find("no trainable parameter name contains '0.wieght'; closest names: "
                        "1.weight, 1.bias"),
            std::string::npos)
      << missed;
  EXPECT_EQ(missed.find("0.weight"), std::string::npos) << missed;
  expect_error([&] { optim::override_optim_bits(opt, *model, {"0.weight"}); },
               {"no trainable parameter name contains '0.weight' (frozen 0.weight does, but "
                "frozen parameters have no optimizer state); closest names: 1.weight"});
  EXPECT_EQ(optim::override_optim_bits(opt, *model, {"weight"}),
            (std::vector<std::string>{"1.weight"}));
}

TEST(Adam8bit, StateDictRoundTripResumesBitExactly) {
  auto run = [](optim::Adam8bit& opt, Tensor& p, Tensor& q, int from, int to) {
    for (int t = from; t < to; ++t) {
      set_grad(p, lcg_floats(50 + t, 5000));
      set_grad(q, lcg_floats(80 + t, 300));
      opt.step();
    }
  };
  Tensor p = make_param(lcg_floats(1, 5000)), q = make_param(lcg_floats(2, 300));
  optim::AdamW8bit opt({p, q});
  opt.override_config(p, "optim_bits", 8);
  run(opt, p, q, 0, 3);
  // Save through a safetensors file, as a checkpoint does.
  TempDir dir;
  const std::string path = dir.file("opt.safetensors");
  {
    optim::OptimizerState sd = opt.state_dict();
    io::NamedTensors named(sd.tensors.begin(), sd.tensors.end());
    io::save_safetensors(path, named, {{"optimizer", sd.meta.dump()}});
  }
  Tensor p2 = make_param(std::vector<float>(p.data<float>(), p.data<float>() + 5000));
  Tensor q2 = make_param(std::vector<float>(q.data<float>(), q.data<float>() + 300));
  optim::AdamW8bit resumed({p2, q2});
  {
    io::SafetensorsFile file = io::load_safetensors(path);
    optim::OptimizerState sd;
    sd.tensors.insert(file.tensors.begin(), file.tensors.end());
    sd.meta = nlohmann::json::parse(file.metadata.at("optimizer"));
    resumed.load_state_dict(sd);
  }
  run(opt, p, q, 3, 6);
  run(resumed, p2, q2, 3, 6);
  for (int64_t i = 0; i < 5000; ++i)
    ASSERT_EQ(bits(p.data<float>()[i]), bits(p2.data<float>()[i])) << i;
  for (int64_t i = 0; i < 300; ++i)
    ASSERT_EQ(bits(q.data<float>()[i]), bits(q2.data<float>()[i])) << i;
  const Snapshot a = snapshot(opt, p), b = snapshot(resumed, p2);
  EXPECT_EQ(a.q1, b.q1);
  EXPECT_EQ(a.q2, b.q2);
  EXPECT_EQ(a.a1, b.a1);
}

// The state of an Adam8bit over one 5000-element parameter after one step.
optim::OptimizerState state_after_one_step() {
  Tensor p = make_param(lcg_floats(1, 5000));
  optim::Adam8bit opt({p});
  set_grad(p, lcg_floats(2, 5000));
  opt.step();
  return opt.state_dict();
}

// A loaded state keeps its format: an optimizer whose override asks for 32-bit state for a
// parameter the checkpoint holds in 8 bits (a resumed run given another --optim-bits-32) keeps
// the 8-bit state and says so; with matching overrides nothing is said.
TEST(Adam8bit, OverrideThatALoadedStateIgnoresIsWarned) {
  const optim::OptimizerState sd = state_after_one_step();
  auto load_into = [&](int bits_override) {
    Tensor p2 = make_param(lcg_floats(1, 5000));
    optim::Adam8bit resumed({p2});
    if (bits_override != 0) resumed.override_config(p2, "optim_bits", bits_override);
    ::testing::internal::CaptureStderr();
    resumed.load_state_dict(sd);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(resumed.uses_8bit_state(p2));
    return err;
  };
  const std::string warned = load_into(32);
  EXPECT_NE(warned.find("parameter 0 (shape [5000]) keeps the 8-bit state of the checkpoint"),
            std::string::npos)
      << warned;
  EXPECT_EQ(load_into(8), "");
  EXPECT_EQ(load_into(0), "");
}

TEST(Adam8bit, LoadingIntoAnotherShapeFailsClearly) {
  const optim::OptimizerState sd = state_after_one_step();
  Tensor other = make_param(lcg_floats(1, 6000));
  optim::Adam8bit wrong({other});
  expect_error([&] { wrong.load_state_dict(sd); },
               {"state.0.", "parameter 0 (shape [6000])", "another shape"});
  EXPECT_TRUE(wrong.state(other)->empty());
  Tensor p = make_param(lcg_floats(1, 5000));
  optim::Adam adam({p});
  expect_error([&] { adam.load_state_dict(sd); }, "state dict is for Adam8bit");
}

// absmax of an integer dtype was converted value by value and trained on; uint8 codes stay
// required.
TEST(Adam8bit, IntegerStateIsRefused) {
  optim::OptimizerState sd = state_after_one_step();
  const Tensor absmax = sd.tensors.at("state.0.absmax1");
  sd.tensors["state.0.absmax1"] = zeros(absmax.shape(), kInt32);
  Tensor p = make_param(lcg_floats(1, 5000));
  optim::Adam8bit resumed({p});
  expect_error([&] { resumed.load_state_dict(sd); },
               {"state.0.absmax1", "has dtype int32", "this state is floating point"});
  EXPECT_TRUE(resumed.state(p)->empty());
}

// A block's absmax is max |m| or max v over the block, never negative. A negative one (a damaged
// checkpoint) was loaded, the block's moments decoded with the wrong sign, and the next step
// wrote NaN weights, reported as a diverged run; it is refused on load, as a negative
// exp_avg_sq is, and the optimizer keeps no state.
TEST(Adam8bit, NegativeAbsmaxIsRefused) {
  for (const char* buffer : {"absmax1", "absmax2"}) {
    SCOPED_TRACE(buffer);
    optim::OptimizerState sd = state_after_one_step();
    const std::string key = std::string("state.0.") + buffer;
    Tensor absmax = sd.tensors.at(key).clone();
    ASSERT_GT(absmax.numel(), 1);
    absmax.data<float>()[1] = -5.0f;
    sd.tensors[key] = absmax;
    Tensor p = make_param(lcg_floats(1, 5000));
    optim::Adam8bit resumed({p});
    expect_error([&] { resumed.load_state_dict(sd); },
                 {key, "holds a negative value (-5)", "a block's absmax", "the file is damaged"});
    EXPECT_TRUE(resumed.state(p)->empty());
  }
  // The undamaged state loads.
  const optim::OptimizerState sd = state_after_one_step();
  Tensor p = make_param(lcg_floats(1, 5000));
  optim::Adam8bit resumed({p});
  resumed.load_state_dict(sd);
  EXPECT_EQ(resumed.state(p)->step, 1);
}

TEST(Adam8bit, NonFiniteGradientRefusesTheStep) {
  Tensor p = make_param(lcg_floats(1, 5000)), q = make_param(lcg_floats(2, 5000));
  optim::Adam8bit opt({p, q});
  set_grad(p, lcg_floats(3, 5000));
  set_grad(q, lcg_floats(4, 5000));
  opt.step();
  const Snapshot before = snapshot(opt, p);
  std::vector<float> bad = lcg_floats(5, 5000);
  bad[4321] = std::nanf("");
  set_grad(p, lcg_floats(6, 5000));
  set_grad(q, bad);
  expect_error([&] { opt.step(); }, {"parameter 1", "element 4321", "refused"});
  const Snapshot after = snapshot(opt, p);
  EXPECT_EQ(before.p, after.p);
  EXPECT_EQ(before.q1, after.q1);
  EXPECT_EQ(opt.state(p)->step, 1);
  bad[4321] = INFINITY;
  set_grad(q, bad);
  expect_error([&] { opt.step(); }, "non-finite");
}

// After a loss scaler's inf check (GradScaler::step) the step skips its own scan and gives the
// same bits; the scan is back for the next plain step().
TEST(Adam8bit, StepWithFiniteGradsSkipsOnlyTheScan) {
  Tensor p = make_param(lcg_floats(1, 5000)), p2 = make_param(lcg_floats(1, 5000));
  optim::Adam8bit a({p}), b({p2});
  for (uint32_t s = 0; s < 3; ++s) {
    set_grad(p, lcg_floats(10 + s, 5000));
    set_grad(p2, lcg_floats(10 + s, 5000));
    a.step();
    b.step_with_finite_grads();
  }
  EXPECT_EQ(snapshot(a, p).p, snapshot(b, p2).p);
  EXPECT_EQ(snapshot(a, p).q1, snapshot(b, p2).q1);
  std::vector<float> bad = lcg_floats(20, 5000);
  bad[7] = std::nanf("");
  set_grad(p2, bad);
  expect_error([&] { b.step(); }, "non-finite");
}

TEST(Adam8bit, HalfParametersWithAndWithoutMasterWeights) {
  for (bool master : {false, true}) {
    Tensor p = from_floats(lcg_floats(1, 5000)).to(kBFloat16);
    p.set_requires_grad(true);
    optim::Adam8bitOptions o;
    o.master_weights = master;
    optim::Adam8bit opt({p}, o);
    Tensor p32 = p.to(kFloat32);
    for (int t = 0; t < 3; ++t) {
      p.set_grad(from_floats(lcg_floats(10 + t, 5000)).to(kBFloat16));
      opt.step();
    }
    const auto* st = opt.state(p);
    EXPECT_EQ(st->buffers.count("master_param"), master ? 1u : 0u);
    EXPECT_EQ(st->buffers.at("state1").dtype(), kUInt8);
    // Three steps of about lr each against random gradients.
    const std::vector<double> now = vals(p), was = vals(p32);
    double moved = 0;
    for (int64_t i = 0; i < 5000; ++i) moved += std::fabs(now[i] - was[i]);
    EXPECT_GT(moved / 5000, 1e-3);
    if (master) {
      // The master moved by 1-3 lr (random gradients); the parameter is its bf16 rounding.
      const std::vector<double> m = vals(st->buffers.at("master_param"));
      double master_moved = 0;
      for (int64_t i = 0; i < 5000; ++i) master_moved += std::fabs(m[i] - was[i]);
      EXPECT_GT(master_moved / 5000, 1e-3);
      EXPECT_EQ(now, vals(st->buffers.at("master_param").to(kBFloat16)));
    }
  }
}

// bf16 parameters with bf16 gradients (bf16-true) step as fp32 ones holding the same values,
// rounded to bf16 after each step, bit for bit (the 8-bit blocks and a small parameter's fp32
// moments alike, tails of a chunk and of a block included), and without fp32 copies of the
// parameters and gradients: the step held 8 bytes per parameter more than its state (a
// bf16-true MLP with adamw8bit peaked at 27 MiB against 15 with adamw), now nothing counted.
TEST(Adam8bit, HalfParametersStepInChunksWithoutFp32Copies) {
  for (bool master : {false, true}) {
    const int64_t n = 300001, small = 1000;  // not a multiple of a chunk or a block
    Tensor p = from_floats(lcg_floats(1, n)).to(kBFloat16);
    Tensor ps = from_floats(lcg_floats(2, small)).to(kBFloat16);
    p.set_requires_grad(true);
    ps.set_requires_grad(true);
    Tensor r = make_param(vals_f(p)), rs = make_param(vals_f(ps));
    optim::Adam8bitOptions o = optim::adamw8bit_defaults();
    optim::AdamW8bit ref({r, rs}, o);
    o.master_weights = master;
    optim::AdamW8bit half({p, ps}, o);
    for (uint32_t t = 0; t < 3; ++t) {
      const Tensor g = from_floats(lcg_floats(10 + t, n)).to(kBFloat16);
      const Tensor gs = from_floats(lcg_floats(20 + t, small)).to(kBFloat16);
      p.set_grad(g);
      ps.set_grad(gs);
      r.set_grad(g.to(kFloat32));
      rs.set_grad(gs.to(kFloat32));
      if (t == 2) reset_peak_memory_stats();
      const int64_t before = memory_allocated();
      half.step();
      if (t == 2) {
        EXPECT_LT(max_memory_allocated() - before, n / 8)
            << "the step allocated fp32 copies of the parameters or gradients";
      }
      ref.step();
      if (!master) {
        // The bf16 parameter is rounded after every step: so is the reference.
        NoGradGuard guard;
        r.copy_(r.to(kBFloat16).to(kFloat32));
        rs.copy_(rs.to(kBFloat16).to(kFloat32));
      }
    }
    EXPECT_EQ(vals_f(p), vals_f(r.to(kBFloat16))) << "master " << master;
    EXPECT_EQ(vals_f(ps), vals_f(rs.to(kBFloat16))) << "master " << master;
    const auto* a = half.state(p);
    const auto* b = ref.state(r);
    for (const char* key : {"state1", "state2"}) {
      const Tensor x = a->buffers.at(key), y = b->buffers.at(key);
      EXPECT_TRUE(std::equal(x.data<uint8_t>(), x.data<uint8_t>() + n, y.data<uint8_t>())) << key;
    }
    const Tensor m = half.state(ps)->buffers.at("exp_avg"),
                 mr = ref.state(rs)->buffers.at("exp_avg");
    EXPECT_TRUE(std::equal(m.data<float>(), m.data<float>() + small, mr.data<float>()));
    if (master) EXPECT_EQ(vals_f(a->buffers.at("master_param")), vals_f(r));
  }
}

// The step's parameters are laid end to end and cut into slices (16K elements here) that the
// threads take as they come free; slice edges fall inside tensors and inside blocks (the sizes
// are not multiples of the 256-element block). With 1, 2 and 3 threads, codes, absmax and
// parameters must equal those of each parameter stepped by an optimizer of its own, below the
// parallel grain and so in one piece.
TEST(Adam8bit, SlicedStepMatchesEachParameterInOnePiece) {
  const std::vector<int64_t> sizes = {30001, 20003, 300, 15000};
  auto params = [&] {
    std::vector<Tensor> ps;
    for (size_t i = 0; i < sizes.size(); ++i)
      ps.push_back(make_param(lcg_floats(static_cast<uint32_t>(7 + i), sizes[i])));
    return ps;
  };
  auto grads = [&](int step, size_t i) {
    return lcg_floats(static_cast<uint32_t>(50 + 10 * step + i), sizes[i]);
  };
  std::vector<Snapshot> alone;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 4096) continue;  // fp32 state
    Tensor p = params()[i];
    optim::AdamW8bit opt({p});
    for (int step = 0; step < 3; ++step) {
      set_grad(p, grads(step, i));
      opt.step();
    }
    alone.push_back(snapshot(opt, p));
  }
  ASSERT_EQ(alone.size(), 3u);
  for (int threads : {1, 2, 3}) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<Tensor> ps = params();
    optim::AdamW8bit opt(ps);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < ps.size(); ++i) set_grad(ps[i], grads(step, i));
      opt.step();
    }
    omp_set_num_threads(saved);
    size_t k = 0;
    for (const Tensor& p : ps) {
      if (p.numel() < 4096) continue;
      const Snapshot s = snapshot(opt, p);
      EXPECT_EQ(s.q1, alone[k].q1) << threads << " threads, parameter " << k;
      EXPECT_EQ(s.q2, alone[k].q2) << threads << " threads, parameter " << k;
      EXPECT_EQ(s.a1, alone[k].a1) << threads << " threads, parameter " << k;
      EXPECT_EQ(s.a2, alone[k].a2) << threads << " threads, parameter " << k;
      EXPECT_EQ(s.p, alone[k].p) << threads << " threads, parameter " << k;
      ++k;
    }
  }
}

}  // namespace
}  // namespace mantissa
