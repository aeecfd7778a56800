// Reductions on a GPU against the CPU: sum/mean over all and over dims (keepdim, interleaved
// dims, non-contiguous input, > 65535 rows), sum_to (broadcast gradients), the bias row sum,
// amax, max(dim) and argmax with their gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cuda_op_check.h"
#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/ops/reduce.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

TEST(CudaReduce, SumAndMeanMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double tol = tol_of(dt);
    const Tensor x = randn_cpu({7, 33, 5, 19}, 1).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "sum all", {x}, [](const V& v) { return sum(v[0]); }, tol);
    check_op(
        n + "mean all", {x}, [](const V& v) { return mean(v[0]); }, tol);
    check_op(
        n + "sum last", {x}, [](const V& v) { return sum(v[0], {-1}); }, tol);
    check_op(
        n + "sum first keepdim", {x}, [](const V& v) { return sum(v[0], {0}, true); }, tol);
    check_op(
        n + "mean middle", {x},
        [](const V& v) {
          return mean(v[0], {1, 2});
        },
        tol);
    check_op(
        n + "sum interleaved", {x},
        [](const V& v) {
          return sum(v[0], {0, 2}, true);
        },
        tol);
    check_op(
        n + "mean transposed", {x}, [](const V& v) { return mean(v[0].transpose(1, 3), {3}); },
        tol);
  }
}

TEST(CudaReduce, ManyRowsAndIntegerSums) {
  MANTISSA_REQUIRE_GPU();
  // 70001 rows (> 65535: the row kernel's block loop) and 70001 columns.
  const Tensor x = randn_cpu({70001, 3}, 2);
  check_op(
      "rows", {x}, [](const V& v) { return sum(v[0], {1}); }, 1e-5);
  check_op(
      "columns", {x}, [](const V& v) { return mean(v[0], {0}); }, 1e-5);
  check_op(
      "many rows softmax-like", {x.t()}, [](const V& v) { return sum(v[0], {0}); }, 1e-5);
  const Tensor i = randn_cpu({100, 37}, 3, 50.0).to(kInt32);
  const Tensor gs = sum(i.to(kGpu), {0});
  EXPECT_EQ(gs.dtype(), kInt64);
  EXPECT_EQ(gs.cpu().to_vector<int64_t>(), sum(i, {0}).to_vector<int64_t>());
}

TEST(CudaReduce, SumToAndBiasRowSum) {
  MANTISSA_REQUIRE_GPU();
  const Tensor g = randn_cpu({6, 35, 129}, 4);
  for (const Shape& to : {Shape{129}, Shape{35, 1}, Shape{6, 1, 129}, Shape{1, 35, 1}, Shape{}}) {
    const Tensor want = sum_to(g, to);
    const Tensor got = sum_to(g.to(kGpu), to);
    EXPECT_TRUE(got.is_cuda());
    EXPECT_EQ(got.shape(), to);
    EXPECT_LE(cuda_test::rel_error(got, want), 1e-5) << shape_str(to);
  }
  for (DType dt : {kFloat32, kBFloat16}) {
    const Tensor g2 = randn_cpu({1000, 77}, 5).to(dt);
    const Tensor got = kernels::sum_rows(g2.to(kGpu));
    EXPECT_TRUE(got.is_cuda());
    EXPECT_LE(cuda_test::rel_error(got, kernels::sum_rows(g2)), tol_of(dt));
  }
  // Broadcast gradients flow back through sum_to.
  check_op(
      "broadcast add grads", {randn_cpu({40, 1, 7}, 6), randn_cpu({9, 7}, 7)},
      [](const V& v) { return add(v[0], v[1]); }, 1e-5);
}

TEST(CudaReduce, SplitColumnSumsMatchTheCpuAndRepeat) {
  MANTISSA_REQUIRE_GPU();
  // Many rows, few column tiles: the two-stage column sum (chunks of rows, then the chunks).
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const Shape& shape : {Shape{4096, 768}, Shape{3001, 45}, Shape{5, 2000, 33}}) {
      const Tensor x = randn_cpu(shape, 9).to(dt);
      const Tensor g = x.to(kGpu);
      const int64_t d = static_cast<int64_t>(shape.size()) - 2;
      const Tensor want = sum(x, {d});
      const Tensor got = sum(g, {d});
      EXPECT_LE(cuda_test::rel_error(got, want), 2 * tol_of(dt)) << dt.name() << shape_str(shape);
      // Deterministic: the same bits again.
      const Tensor again = sum(g, {d}).cpu(), first = got.cpu();
      EXPECT_EQ(std::memcmp(first.data_ptr(), again.data_ptr(), first.nbytes()), 0);
      if (shape.size() == 2) {
        const Tensor rows = kernels::sum_rows(g);
        EXPECT_LE(cuda_test::rel_error(rows, kernels::sum_rows(x)), 2 * tol_of(dt));
        EXPECT_LE(cuda_test::rel_error(mean(g, {0}), mean(x, {0})), 2 * tol_of(dt));
      }
    }
  }
  const Tensor i = randn_cpu({5000, 37}, 3, 50.0).to(kInt32);
  EXPECT_EQ(sum(i.to(kGpu), {0}).cpu().to_vector<int64_t>(), sum(i, {0}).to_vector<int64_t>());
}

TEST(CudaReduce, MaxArgmaxAndAmax) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    const Tensor x = randn_cpu({45, 300}, 8).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "max dim 1", {x}, [](const V& v) { return max(v[0], 1).values; }, 0);
    check_op(
        n + "max dim 0 keepdim", {x}, [](const V& v) { return max(v[0], 0, true).values; }, 0);
    check_op(
        n + "amax", {x}, [](const V& v) { return amax(v[0], {1}); }, 0);
    check_op(
        n + "max all", {x}, [](const V& v) { return max(v[0]); }, 0);
    for (int64_t d : {0, 1}) {
      const Tensor want = argmax(x, d);
      const Tensor got = argmax(x.to(kGpu), d);
      EXPECT_EQ(got.cpu().to_vector<int64_t>(), want.to_vector<int64_t>());
      EXPECT_EQ(max(x.to(kGpu), d).indices.cpu().to_vector<int64_t>(), want.to_vector<int64_t>());
    }
  }
  // Ties pick the first maximum, NaN beats every number, as on the CPU.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor t = tensor_of({1, 3, 3, 2, 0, nan, 5, nan, -1, -1, -1, -1}, {3, 4}, kFloat32);
  EXPECT_EQ(argmax(t.to(kGpu), 1).cpu().to_vector<int64_t>(), argmax(t, 1).to_vector<int64_t>());
  check_op(
      "amax ties", {tensor_of({1, 3, 3, 2, 0, 4, 4, 4}, {2, 4}, kFloat32)},
      [](const V& v) { return amax(v[0], {1}); }, 0);
}

}  // namespace
}  // namespace mantissa
