// Matrix-product throughput through mantissa::matmul, the path every Linear layer takes.
// Each benchmark reports GFLOP/s (2*M*N*K per product) and the fraction of this machine's
// peak for the dtype, so a number reads as "how close to the chip" rather than in isolation.
//
// Square products 256^3 .. 4096^3 show the kernel's ceiling; the MLP shapes (784-1024-1024-10
// at batch 256) show what training actually runs: per layer the forward x W^T, the input
// gradient dY W and the weight gradient dY^T x.
//
//   build-bench/bench_matmul                                   # everything, ~40 s
//   build-bench/bench_matmul --benchmark_filter=MLP            # model shapes only
//   MANTISSA_PEAK_F32_GFLOPS=... MANTISSA_PEAK_BF16_GFLOPS=... build-bench/bench_matmul
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mantissa/mantissa.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

// f16 has no native dot product here (operands are widened to fp32), so its fraction is
// reported against the fp32 peak.
double peak_gflops(DType dtype) {
  static const double f32 = peak_from_env("MANTISSA_PEAK_F32_GFLOPS", kPeakF32Gflops);
  static const double bf16 = peak_from_env("MANTISSA_PEAK_BF16_GFLOPS", kPeakBF16Gflops);
  return dtype == kBFloat16 ? bf16 : f32;
}

// Times c = a @ b with a: [m, k] and b: [k, n] (b_transposed: b is the transpose view of a
// contiguous [n, k], as Linear's forward uses its weight).
void run_matmul(benchmark::State& state, DType dtype, int64_t m, int64_t k, int64_t n,
                bool a_transposed, bool b_transposed) {
  NoGradGuard no_grad;
  Tensor a = a_transposed ? randn({k, m}).to(dtype).t() : randn({m, k}).to(dtype);
  Tensor b = b_transposed ? randn({n, k}).to(dtype).t() : randn({k, n}).to(dtype);
  // Timed here (wall clock) so the counters are plain numbers: Google Benchmark's rate
  // counters would print "/s" after a fraction.
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double gflops = flops * static_cast<double>(state.iterations()) / secs * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["of_peak"] = gflops / peak_gflops(dtype);
  state.SetLabel(std::string(dtype.name()));
}

void BM_MatmulSquare(benchmark::State& state, DType dtype) {
  const int64_t s = state.range(0);
  run_matmul(state, dtype, s, s, s, false, false);
}

// The three GEMMs of one Linear(in -> out) at batch B:
//   0 forward        y  = x W^T     [B,in] x [in,out]   (W stored [out,in])
//   1 input grad     dx = dY W      [B,out] x [out,in]
//   2 weight grad    dW = dY^T x    [out,B] x [B,in]    (dY^T a transposed view)
void BM_MatmulMLP(benchmark::State& state, DType dtype) {
  const int64_t in = state.range(0), out = state.range(1), which = state.range(2);
  constexpr int64_t B = 256;
  switch (which) {
    case 0:
      run_matmul(state, dtype, B, in, out, false, true);
      break;
    case 1:
      run_matmul(state, dtype, B, out, in, false, false);
      break;
    default:
      run_matmul(state, dtype, out, B, in, true, false);
      break;
  }
}

void square_args(benchmark::internal::Benchmark* b) {
  for (int64_t s : {256, 512, 1024, 2048, 4096}) b->Arg(s);
  b->ArgName("n")->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

// (in, out, gemm): the MLP 784-1024-1024-10's layers, each with its three GEMMs.
void mlp_args(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{784, 1024}, {1024, 1024}, {1024, 10}}) {
    for (int64_t which : {0, 1, 2}) b->Args({in, out, which});
  }
  b->ArgNames({"in", "out", "gemm"})->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

BENCHMARK_CAPTURE(BM_MatmulSquare, f32, kFloat32)->Apply(square_args);
BENCHMARK_CAPTURE(BM_MatmulSquare, bf16, kBFloat16)->Apply(square_args);
BENCHMARK_CAPTURE(BM_MatmulSquare, f16, kFloat16)->Apply(square_args);
BENCHMARK_CAPTURE(BM_MatmulMLP, f32, kFloat32)->Apply(mlp_args);
BENCHMARK_CAPTURE(BM_MatmulMLP, bf16, kBFloat16)->Apply(mlp_args);
BENCHMARK_CAPTURE(BM_MatmulMLP, f16, kFloat16)->Apply(mlp_args);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("peak_f32_gflops", std::to_string(peak_gflops(kFloat32)));
  benchmark::AddCustomContext("peak_bf16_gflops", std::to_string(peak_gflops(kBFloat16)));
  benchmark::AddCustomContext("f16_fraction_against", "fp32 peak (f16 is widened to fp32)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
