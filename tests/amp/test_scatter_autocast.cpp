// The scatter family under autocast: fp16/bf16 inputs are widened and the ops run in fp32, so a
// 16-mixed forward that scatter-adds many small values (point-cloud features into voxels)
// gets the fp32 answer, where accumulating in fp16 loses them.
#include <gtest/gtest.h>

#include "mantissa/amp/autocast.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/half.h"
#include "mantissa/ops/scatter.h"
#include "mantissa/train/precision_registry.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

constexpr int64_t kPoints = 200000;
constexpr double kSmall = 1.0 / 1024;  // exact in fp16

// kPoints features of 2^-10 each, all into one of `bins` voxels by point index mod bins.
struct PointCloud {
  Tensor index, features;
};
PointCloud cloud(int64_t bins, DType dt) {
  std::vector<int64_t> idx(kPoints);
  for (int64_t p = 0; p < kPoints; ++p) idx[p] = p % bins;
  return {tensor<int64_t>(idx, {kPoints}), full({kPoints}, kSmall, dt)};
}

TEST(ScatterAutocast, SixteenMixedScatterAddMatchesFp32) {
  const PointCloud c16 = cloud(1, kFloat16), c32 = cloud(1, kFloat32);
  const Tensor ref = scatter_add(zeros({1}, kFloat32), 0, c32.index, c32.features);
  EXPECT_EQ(ref.item(), kPoints * kSmall);  // 195.3125, exact in fp32

  // The Trainer's 16-mixed forward scope (fp16 autocast) around an fp16 model's tensors.
  auto plugin = train::make_precision("16-mixed");
  Tensor mixed;
  {
    auto scope = plugin->forward_context();
    ASSERT_TRUE(amp::is_autocast_enabled(DeviceType::kCPU));
    mixed = scatter_add(zeros({1}, kFloat16), 0, c16.index, c16.features);
  }
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_EQ(mixed.item(), ref.item());

  // A naive fp16 accumulation (what a kernel adding into its fp16 output does) stalls at 2:
  // from there 2^-10 is half an fp16 ulp and each addition ties back to the even value.
  Half acc(0.0f);
  for (int64_t p = 0; p < kPoints; ++p) acc = Half(static_cast<float>(acc) + float(kSmall));
  EXPECT_EQ(static_cast<float>(acc), 2.0f);
  EXPECT_GT(std::abs(ref.item() - static_cast<float>(acc)), 190.0);
}

TEST(ScatterAutocast, FP16OutputOverflowsWithoutAutocastButNotUnder) {
  // 200000 ones into one voxel: 200000 is above fp16's largest finite value (65504).
  const Tensor idx = zeros({kPoints}, kInt64);
  const Tensor ones16 = ones({kPoints}, kFloat16);
  const Tensor plain = scatter_add(zeros({1}, kFloat16), 0, idx, ones16);
  EXPECT_EQ(plain.dtype(), kFloat16);
  EXPECT_TRUE(std::isinf(plain.item()));
  amp::autocast ac(DeviceType::kCPU, kFloat16);
  const Tensor widened = scatter_add(zeros({1}, kFloat16), 0, idx, ones16);
  EXPECT_EQ(widened.dtype(), kFloat32);
  EXPECT_EQ(widened.item(), kPoints);
}

TEST(ScatterAutocast, EveryScatterOpWidensToFp32) {
  Generator g(3);
  const Tensor x = uniform({4, 3}, -1, 1, kBFloat16, &g);
  const Tensor v = uniform({2, 3}, -1, 1, kBFloat16, &g);
  const Tensor f32 = uniform({2, 3}, -1, 1, kFloat32, &g);
  const Tensor row = tensor<int64_t>({3, 1});
  const Tensor gidx = tensor<int64_t>({0, 1, 2, 3, 0, 1}, {2, 3});
  amp::autocast ac;  // bf16
  EXPECT_EQ(scatter(x, 0, gidx, v).dtype(), kFloat32);
  EXPECT_EQ(scatter_add(x, 0, gidx, v).dtype(), kFloat32);
  EXPECT_EQ(index_add(x, 0, row, v).dtype(), kFloat32);
  EXPECT_EQ(index_put(x, {row}, v, true).dtype(), kFloat32);
  // Mixed bf16 self and fp32 values meet in fp32 (outside autocast that is a dtype error).
  EXPECT_EQ(scatter_add(x, 0, gidx, f32).dtype(), kFloat32);
  // The widened copies are graph nodes: gradients come back in each input's dtype.
  Tensor xs = x.clone().detach().requires_grad_();
  Tensor vs = v.clone().detach().requires_grad_();
  scatter_add(xs, 0, gidx, vs).backward(ones({4, 3}));
  EXPECT_EQ(xs.grad().dtype(), kBFloat16);
  EXPECT_EQ(vs.grad().dtype(), kBFloat16);
}

}  // namespace
}  // namespace mantissa
