// One AdamW step over the weights of the FP8 benchmark MLP (784-1024-1024-10: 1.87M values) held
// in bfloat16 with bfloat16 moments (the transformer-engine and bf16-true precisions' weights)
// against the same weights in float32, the two stepped alternately in one loop so that both see
// the same machine load. Reports each step's milliseconds and `bf16/fp32`, the bf16 step's speed
// over the fp32 one's (> 1: the bf16 step is faster); repetitions give the spread. The level
// follows the CPU; MANTISSA_DISABLE_SIMD=avx512f times the AVX2 kernel.
//
//   ninja -C build -j2 bench_adamw_bf16 && OMP_NUM_THREADS=1 build/bench_adamw_bf16
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/optim/adam.h"

namespace {

using namespace mantissa;
using Clock = std::chrono::steady_clock;

std::vector<Tensor> mlp_weights(DType dtype) {
  manual_seed(0);
  std::vector<Tensor> params;
  for (const Shape& shape :
       std::vector<Shape>{{1024, 784}, {1024}, {1024, 1024}, {1024}, {10, 1024}, {10}}) {
    Tensor p = randn(shape).to(dtype);
    p.set_requires_grad(true);
    p.set_grad((randn(shape) * 1e-3).to(dtype));
    params.push_back(p);
  }
  return params;
}

void BM_RatioBf16OverFp32(benchmark::State& state) {
  optim::AdamW fp32(mlp_weights(kFloat32), 1e-3);
  optim::AdamW bf16(mlp_weights(kBFloat16), 1e-3);
  fp32.step();  // creates the state
  bf16.step();
  double t32 = 0, t16 = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fp32.step();
    const auto t1 = Clock::now();
    bf16.step();
    const auto t2 = Clock::now();
    t32 += std::chrono::duration<double>(t1 - t0).count();
    t16 += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["fp32_ms"] = 1e3 * t32 / static_cast<double>(state.iterations());
  state.counters["bf16_ms"] = 1e3 * t16 / static_cast<double>(state.iterations());
  state.counters["bf16/fp32"] = t32 / t16;
}
BENCHMARK(BM_RatioBf16OverFp32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1)
    ->Repetitions(5);

}  // namespace

BENCHMARK_MAIN();
