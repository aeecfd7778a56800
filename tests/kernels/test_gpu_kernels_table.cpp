// The GPU kernel table (src/kernels/gpu_kernels.h): filled in full by the CUDA backend, a clear
// error without it, and never asked for by an op whose tensors are all on the CPU.
#include "kernels/gpu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/conv.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/embedding.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/pool.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/softmax.h"

namespace mantissa {
namespace {

using kernels::GpuKernels;

// Every entry is a function pointer; the table read as an array of them.
using AnyEntry = void (*)();
static_assert(sizeof(GpuKernels) % sizeof(AnyEntry) == 0);
constexpr size_t kEntries = sizeof(GpuKernels) / sizeof(AnyEntry);

std::vector<AnyEntry> entries_of(const GpuKernels& t) {
  std::vector<AnyEntry> out(kEntries);
  std::memcpy(out.data(), &t, sizeof(GpuKernels));
  return out;
}

TEST(GpuKernelsTable, EveryEntryIsFilledAndDistinctInACudaBuild) {
  if (!cuda::is_built())
    GTEST_SKIP() << "built without the CUDA backend (see NamesTheMissingBackend)";
  const std::vector<AnyEntry> e = entries_of(kernels::gpu_kernels());
  ASSERT_GT(e.size(), 30u);
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NE(e[i], nullptr) << "entry " << i << " is null";
  // No entry copied from another with the same signature (conv2d's three products, say).
  EXPECT_EQ(std::set<AnyEntry>(e.begin(), e.end()).size(), e.size());
}

TEST(GpuKernelsTable, NamesTheMissingBackendInABuildWithoutIt) {
  if (cuda::is_built()) GTEST_SKIP() << "built with the CUDA backend";
  try {
    (void)kernels::gpu_kernels();
    FAIL() << "gpu_kernels() returned a table in a build without the CUDA backend";
  } catch (const Error& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("built without the CUDA backend"), std::string::npos) << what;
    EXPECT_NE(what.find("-DMANTISSA_CUDA=ON"), std::string::npos) << what;
  }
}

// A float64 leaf of `shape` holding f(i) at flat index i.
template <typename F>
Tensor leaf_of(const Shape& shape, F f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = f(static_cast<double>(i));
  Tensor t = tensor_of(v, shape, kFloat64);
  t.requires_grad_();
  return t;
}

// Forward and backward through every op family that has a GPU branch, on CPU tensors. Without
// the CUDA backend gpu_kernels() throws, so this passing there proves the CPU path never asks
// for the table; the numbers are PyTorch's (float64) for the same graph.
TEST(GpuKernelsTable, CpuOpsOnCpuTensorsRunTheirCpuLoops) {
  Tensor x = leaf_of({2, 1, 5, 5}, [](double i) { return std::sin(0.37 * i); });
  Tensor w = leaf_of({3, 1, 3, 3}, [](double i) { return 0.5 * std::cos(0.21 * i); });
  const Tensor b = tensor_of({0.1, -0.2, 0.3}, {3}, kFloat64);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  y = batch_norm(y, zeros({3}, kFloat64), ones({3}, kFloat64), Tensor(), Tensor(), true);
  y = gelu(y);
  Tensor z = add(max_pool2d(y, {2, 2}), adaptive_avg_pool2d(y, {2, 2})).reshape({2, 12});
  z = layer_norm(z, {12});
  z = where(gt(z, 0.0), z, mul(z, 0.5));
  z = dropout(z, 0.0, /*training=*/true);
  const Tensor target = tensor_of({1, 7}, {2}, kInt64);
  Tensor loss = cross_entropy(z, target);
  loss = add(loss, mul(sum(amax(z, {1})), 0.1));
  loss = add(loss, mul(sum(softmax(z, 1).select(1, 3)), 0.01));
  loss = add(loss, mul(sum(max(z, 1).values), 0.05));
  loss.backward();
  EXPECT_NEAR(loss.item(), 2.7473766858413957, 1e-12);
  const std::vector<double> gx = x.grad().to_vector<double>();
  const double gx_ref[] = {0.12976642312214887, -0.27068468402781937, -0.33863074006530736,
                           -0.4307570497857467, -0.07905752907698926, 0.06607273859946909};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(gx[i], gx_ref[i], 1e-12) << i;
  EXPECT_NEAR(sum(x.grad()).item(), -0.11186214962281531, 1e-12);
  const std::vector<double> gw = w.grad().to_vector<double>();
  const double gw_ref[] = {-0.11978049392590492, -0.029936439316112062, -0.04580057068126736,
                           0.012869532730235};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(gw[i], gw_ref[i], 1e-12) << i;
  EXPECT_NEAR(sum(w.grad()).item(), -0.7362682573926256, 1e-12);

  // embedding: rows 1 and 4 (twice) and 0 of a (6, 3) table of 0.1 i - 0.7.
  Tensor table = leaf_of({6, 3}, [](double i) { return 0.1 * i - 0.7; });
  const Tensor e = embedding(table, tensor_of({1, 4, 4, 0}, {2, 2}, kInt64));
  const Tensor l2 = sum(mul(e, e));
  l2.backward();
  EXPECT_NEAR(l2.item(), 3.59, 1e-12);
  const std::vector<double> ge = table.grad().to_vector<double>();
  const double ge_ref[] = {-1.4, -1.2, -1.0, -0.8, -0.6, -0.4, 0, 0, 0,
                           0,    0,    0,    2.0,  2.4,  2.8,  0, 0, 0};
  for (int i = 0; i < 18; ++i) EXPECT_NEAR(ge[i], ge_ref[i], 1e-12) << i;
}

}  // namespace
}  // namespace mantissa
