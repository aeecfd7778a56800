// float32 matmul precision (mantissa/ops/matmul_precision.h): speed and error against a
// float64 product of "highest", "high" (bf16x3) and "medium" (one bf16 product), in one run.
//
// For each shape and mode: the median time of `reps` products (after a warm-up), GFLOP/s
// (2*M*N*K per product; "high" does three products' work but counts one), and the relative
// Frobenius error ||C - C64|| / ||C64|| on N(0, 1) operands. On a CPU without AVX-512 BF16 the
// bf16 products run on the fp32 GEMM (rounded operands): "high" and "medium" are then slower
// than "highest" (packing, and 3x the products for "high") -- only the numerics are theirs.
//
//   build-bench/bench_float32_matmul_precision            # 256^3, 1024^3, 784x1024x256
//   build-bench/bench_float32_matmul_precision 2048 5     # one square size, 5 repetitions
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/mantissa.h"
#include "mantissa/ops/matmul_precision.h"

using namespace mantissa;

namespace {

struct Shape3 {
  int64_t m, n, k;
};

double rel_error(const Tensor& got, const Tensor& want64) {
  const std::vector<double> g = got.to_vector<double>(), w = want64.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape3> shapes = {{256, 256, 256}, {1024, 1024, 1024}, {256, 1024, 784}};
  if (argc > 1) {
    const int64_t s = std::atoll(argv[1]);
    shapes = {{s, s, s}};
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  std::printf("float32 matmul precision: CPU %s AVX-512 BF16 (%s)\n",
              has_native_bf16() ? "has" : "lacks",
              has_native_bf16() ? "native bf16 GEMM" : "emulated through the fp32 GEMM");
  std::printf("%-18s %-8s %12s %10s %14s\n", "M x N x K", "mode", "median ms", "GFLOP/s",
              "rel. error");
  Generator gen(0);
  for (const Shape3& s : shapes) {
    const Tensor a = randn({s.m, s.k}, kFloat32, &gen), b = randn({s.k, s.n}, kFloat32, &gen);
    const Tensor want = matmul(a.to(kFloat64), b.to(kFloat64));
    for (const char* mode : {"highest", "high", "medium"}) {
      set_float32_matmul_precision(mode);
      Tensor c = matmul(a, b);  // warm-up (and primitive creation)
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        c = matmul(a, b);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      const double gflops = 2.0 * s.m * s.n * s.k / (med * 1e6);
      std::printf("%5lld x %5lld x %5lld %-8s %12.3f %10.1f %14.3e\n", (long long)s.m,
                  (long long)s.n, (long long)s.k, mode, med, gflops, rel_error(c, want));
    }
  }
  set_float32_matmul_precision("highest");
  return 0;
}
