// softmax / log_softmax and cross_entropy on a GPU against the CPU, forward and gradients:
// last and middle dims, reductions, ignore_index, label smoothing, bf16/fp16 logits.
#include <gtest/gtest.h>

#include "cuda_op_check.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/softmax.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

TEST(CudaSoftmax, ForwardAndBackwardMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double tol = 2 * tol_of(dt);
    const Tensor x = randn_cpu({6, 37, 1001}, 1, 3.0).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "softmax last", {x}, [](const V& v) { return softmax(v[0], -1); }, tol);
    check_op(
        n + "log_softmax last", {x}, [](const V& v) { return log_softmax(v[0], -1); }, tol);
    check_op(
        n + "softmax middle", {x}, [](const V& v) { return softmax(v[0], 1); }, tol);
    check_op(
        n + "log_softmax first", {x}, [](const V& v) { return log_softmax(v[0], 0); }, tol);
    check_op(
        n + "softmax transposed", {x}, [](const V& v) { return softmax(v[0].transpose(1, 2), -1); },
        tol);
  }
  // More than 65535 rows.
  check_op(
      "many rows", {randn_cpu({70001, 10}, 2)}, [](const V& v) { return log_softmax(v[0], 1); },
      1e-5);
}

TEST(CudaCrossEntropy, ForwardAndBackwardMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  const int64_t N = 333, C = 77;
  std::vector<int64_t> t(N);
  for (int64_t i = 0; i < N; ++i) t[i] = (i * 31 + 7) % C;
  t[5] = -100;
  t[200] = -100;
  const Tensor target = tensor(t, {N});
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor x = randn_cpu({N, C}, 3, 2.0).to(dt);
    for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
      for (double eps : {0.0, 0.1}) {
        CrossEntropyOptions o;
        o.reduction = r;
        o.label_smoothing = eps;
        check_op(
            std::string(dt.name()) + " reduction " + std::to_string(int(r)) + " eps " +
                std::to_string(eps),
            {x, target}, [o](const V& v) { return cross_entropy(v[0], v[1], o); }, 2 * tol_of(dt));
      }
    }
  }
  // A single (C) row with a 0-dim target; a target on the CPU with GPU logits is an error.
  check_op(
      "unbatched", {randn_cpu({C}, 4), scalar_tensor(3, kInt64)},
      [](const V& v) { return cross_entropy(v[0], v[1]); }, 1e-5);
  EXPECT_THROW((void)cross_entropy(randn_cpu({N, C}, 5).to(kGpu), target), Error);
  // Out-of-range targets are refused as on the CPU.
  EXPECT_THROW((void)cross_entropy(randn_cpu({2, 3}, 6).to(kGpu),
                                   tensor(std::vector<int64_t>{0, 3}, {2}).to(kGpu)),
               Error);
}

}  // namespace
}  // namespace mantissa
