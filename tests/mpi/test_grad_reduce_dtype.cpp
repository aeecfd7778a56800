// The dtype gradients are reduced in (dist::DDPOptions::reduce_dtype, --grad-reduce-dtype)
// under mpirun (CTest mpi.ddp_equivalence at 2 ranks, mpi.zero_equivalence_4 at 4).
//
// Every rank builds every rank's gradient from a seed, so each rank knows the exact float32
// average and can check what the reduction returned: in float32 at 2 ranks the float32 sum of
// the two; in bfloat16 each rank's gradient rounded to bfloat16 and every partial sum rounded
// again, so N times the average is a bfloat16 value (N a power of two), at 2 ranks exactly
// bf16(bf16(g0) + bf16(g1)) / 2, and every element within the bound docs/distributed.md states:
// |avg_bf16 - avg_f32| <= ((1 + 2^-8)^N - 1) * mean_r |g_r| (plus float32's own rounding).
// The same for zero2's reduce-scatter (OptimizerShard), and a training run whose weights stay
// within the stated bound of the float32 run's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mantissa/core/convert.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/dist/ddp.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/trainer.h"
#include "train/optimizer_shard.h"
#include "train/tiny_module.h"

using namespace mantissa;

namespace {

constexpr int64_t kElements = 1000;

// Rank r's gradient: randn from seed 100 + r, spread over several binades.
std::vector<float> gradient_of_rank(int r) {
  Generator gen(100 + static_cast<uint64_t>(r));
  std::vector<float> g = randn({kElements}, kFloat32, &gen).to_vector<float>();
  for (int64_t i = 0; i < kElements; ++i) g[i] *= std::ldexp(1.0f, static_cast<int>(i % 7) - 3);
  return g;
}

float round_bf16(float x) {
  uint16_t b = 0;
  convert_f32_to_bf16(&x, &b, 1);
  float y = 0;
  convert_bf16_to_f32(&b, &y, 1);
  return y;
}

bool is_bf16_value(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xffffu) == 0;
}

// Checks this rank's averaged gradient elements [begin, end) (`got`, float32) against every
// rank's gradients; *differ: how many differ from the float32 average.
void check_average(const std::vector<float>& got, int64_t begin, int64_t end, DType dtype,
                   int64_t* differ) {
  const int world = dist::world()->world_size();
  std::vector<std::vector<float>> g;
  for (int r = 0; r < world; ++r) g.push_back(gradient_of_rank(r));
  const double u = std::ldexp(1.0, -8);  // bfloat16's unit roundoff
  const double growth = std::pow(1 + u, world) - 1;
  *differ = 0;
  for (int64_t i = begin; i < end; ++i) {
    float sum = 0;  // float32 sum in rank order (at 2 ranks the only order)
    double abs_sum = 0;
    for (int r = 0; r < world; ++r) {
      sum += g[r][i];
      abs_sum += std::abs(g[r][i]);
    }
    const float f32_avg = sum / static_cast<float>(world);
    const float a = got[static_cast<size_t>(i - begin)];
    if (a != f32_avg) ++*differ;
    if (dtype == kFloat32) {
      // At 2 ranks a + b is the only sum; beyond, MPI's order may differ by float32 rounding.
      if (world == 2)
        ASSERT_EQ(a, f32_avg) << "element " << i;
      else
        ASSERT_NEAR(a, f32_avg, world * std::ldexp(abs_sum / world, -23)) << "element " << i;
      continue;
    }
    ASSERT_TRUE(is_bf16_value(a * static_cast<float>(world)))
        << "element " << i << ": " << a << " * " << world << " is no bfloat16 value";
    if (world == 2)
      ASSERT_EQ(a, round_bf16(round_bf16(g[0][i]) + round_bf16(g[1][i])) * 0.5f) << "element " << i;
    const double bound = growth * abs_sum / world + std::ldexp(abs_sum / world, -22);
    ASSERT_LE(std::abs(static_cast<double>(a) - f32_avg), bound) << "element " << i;
  }
}

// One backward whose gradient of `p` on this rank is gradient_of_rank(rank).
void backward_with_this_ranks_gradient(const Tensor& p) {
  const std::vector<float> g = gradient_of_rank(dist::world()->rank());
  const Tensor c = tensor(g, {kElements});
  sum(mul(p, c)).backward();
}

void check_ddp_reducer(DType dtype) {
  auto comm = dist::world();
  Tensor p = zeros({kElements});
  p.requires_grad_(true);
  dist::DistributedDataParallel reducer({{"p", p}}, comm,
                                        {.bucket_cap_bytes = 1024, .reduce_dtype = dtype});
  reducer.prepare_for_backward(true);
  backward_with_this_ranks_gradient(p);
  reducer.finish_backward();
  EXPECT_EQ(reducer.stats().bytes_per_reduction, kElements * dtype.itemsize());
  int64_t differ = 0;
  check_average(p.grad().to_vector<float>(), 0, kElements, dtype, &differ);
  // bfloat16 changes most elements (their float32 averages have more than 8 significant bits).
  if (dtype == kBFloat16) EXPECT_GT(differ, kElements / 2);
}

void check_zero2_reduce_scatter(DType dtype) {
  auto comm = dist::world();
  Tensor p = zeros({kElements});
  p.requires_grad_(true);
  optim::SGD whole({p}, optim::SGDOptions{.lr = 0.1});
  train::detail::OptimizerShard shard(whole, *comm);
  backward_with_this_ranks_gradient(p);
  shard.reduce_scatter_gradients(/*chunk_bytes=*/256, dtype);  // 64 elements a chunk
  EXPECT_EQ(shard.reduced_bytes(), kElements * dtype.itemsize());
  EXPECT_FALSE(p.grad().defined());
  const int64_t begin = shard.cuts()[comm->rank()], end = shard.cuts()[comm->rank() + 1];
  ASSERT_GT(end, begin);
  int64_t differ = 0;
  check_average(shard.slice(0).grad().to_vector<float>(), begin, end, dtype, &differ);
  if (dtype == kBFloat16) EXPECT_GT(differ, (end - begin) / 2);
}

struct Weights {
  std::vector<float> values;
  std::vector<double> losses;
};

Weights train_tiny(const std::string& strategy, DType dtype) {
  train::TrainerOptions o;
  o.max_steps = 6;
  o.seed = 11;
  o.strategy = strategy;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  o.ddp.bucket_cap_bytes = 64;
  o.ddp.reduce_dtype = dtype;
  train::Trainer t(o);
  train::testing::TinyOptions to;
  to.lr = 1e-2;
  to.adamw = true;
  train::testing::TinyModule m(to);
  data::DataLoader loader(train::testing::tiny_dataset(64), 4, /*shuffle=*/true, 5);
  t.fit(m, loader);
  Weights w;
  w.losses = t.step_losses();
  for (const auto& [name, p] : m.named_parameters()) {
    const auto v = p.to_vector<float>();
    w.values.insert(w.values.end(), v.begin(), v.end());
  }
  return w;
}

}  // namespace

TEST(GradReduceDtype, DdpFloat32IsTheFloat32Average) { check_ddp_reducer(kFloat32); }

TEST(GradReduceDtype, DdpBfloat16TravelsAsBfloat16WithinTheBound) { check_ddp_reducer(kBFloat16); }

TEST(GradReduceDtype, Zero2Float32IsTheFloat32Average) { check_zero2_reduce_scatter(kFloat32); }

TEST(GradReduceDtype, Zero2Bfloat16TravelsAsBfloat16WithinTheBound) {
  check_zero2_reduce_scatter(kBFloat16);
}

TEST(GradReduceDtype, TrainedWeightsStayWithinTheStatedBoundOfFloat32s) {
  // 6 AdamW steps at lr 1e-2. At step t an Adam update moves an element by at most c_t * lr
  // whatever the gradients are (docs/distributed.md: c_t = 1, 1.002, 1.004, 1.007, 1.011, 1.016 for
  // the first six steps, rounded up), so two runs whose gradients differ end at most
  // 2 * lr * sum c_t apart. zero1 reduces as ddp does (its bits); zero2's bfloat16
  // reduce-scatter adds what ddp's all-reduce adds at 2 ranks (its bits), within the bound
  // beyond.
  const int world = dist::world()->world_size();
  const Weights f32 = train_tiny("ddp", kFloat32);
  const Weights ddp = train_tiny("ddp", kBFloat16);
  EXPECT_NE(ddp.values, f32.values) << "bfloat16 reduction left every weight as float32's";
  const double bound = 2 * (1 + 1.002 + 1.004 + 1.007 + 1.011 + 1.016) * 1e-2;  // 2 lr sum c_t
  for (const std::string strategy : {"ddp", "zero1", "zero2"}) {
    const Weights w = strategy == "ddp" ? ddp : train_tiny(strategy, kBFloat16);
    double worst = 0;
    for (size_t i = 0; i < w.values.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(w.values[i]) - f32.values[i]));
    std::printf("[rank %d of %d] %s bfloat16: max |w - w_f32| = %.3g (bound %.3g)\n",
                dist::world()->rank(), world, strategy.c_str(), worst, bound);
    EXPECT_LE(worst, bound) << strategy;
    if (strategy == "zero1" || (strategy == "zero2" && world == 2)) {
      EXPECT_EQ(w.values, ddp.values) << strategy;
      EXPECT_EQ(w.losses, ddp.losses) << strategy;
    }
  }
}
