// One optimizer step over 10M fp32 parameters (ten 1M-element tensors): AdamW (fp32 moments,
// the fused multi-tensor pass) against AdamW8bit (8-bit blockwise moments, one fused pass per
// block). Both take one weight decay and the same gradients; the 8-bit step also checks the
// gradients are finite (unless a loss scaler has: after_scaler/1). Reports elements per
// second, bytes of state per parameter, and `8bit/fp32`: AdamW8bit's speed over AdamW's, from
// interleaved runs.
//
//   ninja -C build-bench -j2 bench_optim8bit && build-bench/bench_optim8bit
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <vector>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"

namespace {

using namespace mantissa;
using Clock = std::chrono::steady_clock;

constexpr int kTensors = 10;
constexpr int64_t kPerTensor = 1 << 20;

struct Setup {
  std::vector<Tensor> params;
  Setup() {
    manual_seed(0);
    for (int i = 0; i < kTensors; ++i) {
      Tensor p = randn({kPerTensor});
      p.set_requires_grad(true);
      p.set_grad(randn({kPerTensor}) * 1e-3);
      params.push_back(p);
    }
  }
};

template <class Opt>
void BM_Step(benchmark::State& state) {
  Setup s;
  Opt opt(s.params);
  opt.step();  // creates the state
  for (auto _ : state) opt.step();
  const double n = static_cast<double>(kTensors * kPerTensor);
  state.counters["elems/s"] =
      benchmark::Counter(n * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["state_B/param"] = static_cast<double>(opt.state_bytes()) / n;
}

// Both optimizers in one loop, alternating, so the ratio sees the same machine load.
// state.range(0) == 1: the 8-bit step as a loss scaler runs it (step_with_finite_grads, after
// its own inf check), without the optimizer's scan of the gradients.
void BM_Ratio8bitOverFp32(benchmark::State& state) {
  const bool after_scaler = state.range(0) == 1;
  Setup a, b;
  optim::AdamW fp32(a.params);
  optim::AdamW8bit eight(b.params);
  fp32.step();
  eight.step();
  double t32 = 0, t8 = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    fp32.step();
    auto t1 = Clock::now();
    if (after_scaler)
      eight.step_with_finite_grads();
    else
      eight.step();
    auto t2 = Clock::now();
    t32 += std::chrono::duration<double>(t1 - t0).count();
    t8 += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["fp32_ms"] = 1e3 * t32 / state.iterations();
  state.counters["8bit_ms"] = 1e3 * t8 / state.iterations();
  state.counters["8bit/fp32"] = t32 / t8;  // speed ratio: > 1 means the 8-bit step is faster
}

// The plain step's finiteness scan alone (what after_scaler/1 skips) over the same 10M
// gradients, split over the threads: GB/s of gradient read. Its data is as hot as the loop
// leaves it (here in L3), so it is a lower bound of the scan's share of the step.
void BM_GradientScan(benchmark::State& state) {
  Setup s;
  const auto scan = kernels::optim::any_non_finite_kernel(simd_level());
  bool bad = false;
  for (auto _ : state) {
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (int i = 0; i < kTensors; ++i)
      bad = bad || scan(s.params[i].grad().data<float>(), kPerTensor);
  }
  benchmark::DoNotOptimize(bad);
  state.counters["GB/s"] = benchmark::Counter(4.0 * kTensors * kPerTensor * state.iterations(),
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GradientScan)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2);

BENCHMARK_TEMPLATE(BM_Step, optim::AdamW)
    ->Name("AdamW_10M")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK_TEMPLATE(BM_Step, optim::AdamW8bit)
    ->Name("AdamW8bit_10M")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_Ratio8bitOverFp32)
    ->ArgName("after_scaler")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(4);

}  // namespace

BENCHMARK_MAIN();
