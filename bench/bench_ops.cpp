// Eager-mode costs outside the matrix products:
//   * per-op overhead: add of two [8] tensors (the work is nil, so the time is dispatch,
//     allocation and, with requires_grad, recording the backward node), in ns/op;
//   * bandwidth-bound ops on 1M floats (add, relu, exp, softmax over rows of 1024), in GB/s
//     of bytes read + written, beside the machine's memory bandwidth as a fraction;
//   * one AdamW step over 1M fp32 parameters and over the MLP's parameters, in GB/s of
//     optimizer traffic, and the update kernel at its widest SIMD level against SSE2.
// 1M floats (4 MiB per tensor) fit in this machine's L3, so fractions above 1 mean cache.
//
//   build-bench/bench_ops                        # ~15 s
//   MANTISSA_PEAK_MEM_GBPS=... build-bench/bench_ops
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cpu/optim/adam_kernels.h"
#include "mantissa/mantissa.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

void set_ns_per_op(benchmark::State& state, Clock::time_point start) {
  state.counters["ns/op"] = 1e9 * seconds_per_iteration(state, start);
}

// ---- per-op overhead ----

void BM_TinyAdd(benchmark::State& state) {
  NoGradGuard no_grad;
  Tensor a = randn({8}), b = randn({8});
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_ns_per_op(state, start);
}

// Grad mode on and both inputs require grad: the op records a backward node, which is freed
// with the result at the end of each iteration (no backward is run).
void BM_TinyAddRequiresGrad(benchmark::State& state) {
  Tensor a = randn({8}).requires_grad_(), b = randn({8}).requires_grad_();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_ns_per_op(state, start);
}

// Forward and backward of the same add: the whole eager cost of one op in a training step.
void BM_TinyAddForwardBackward(benchmark::State& state) {
  Tensor a = randn({8}).requires_grad_(), b = randn({8}).requires_grad_();
  Tensor g = ones({8});
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Tensor c = add(a, b);
    c.backward(g);
    a.reset_grad();
    b.reset_grad();
  }
  set_ns_per_op(state, start);
}

// ---- bandwidth-bound ops on 1M floats ----

constexpr int64_t k1M = int64_t{1} << 20;

void BM_Add(benchmark::State& state, DType dtype) {
  NoGradGuard no_grad;
  Tensor a = randn({k1M}).to(dtype), b = randn({k1M}).to(dtype);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_bandwidth(state, start, 3.0 * static_cast<double>(k1M * dtype.itemsize()));
  state.SetLabel(std::string(dtype.name()));
}

using UnaryOp = Tensor (*)(const Tensor&);

void BM_Unary(benchmark::State& state, UnaryOp op, DType dtype) {
  NoGradGuard no_grad;
  Tensor a = randn({k1M}).to(dtype);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Tensor c = op(a);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_bandwidth(state, start, 2.0 * static_cast<double>(k1M * dtype.itemsize()));
  state.SetLabel(std::string(dtype.name()));
}

Tensor relu_op(const Tensor& a) { return relu(a); }
Tensor exp_op(const Tensor& a) { return exp(a); }
Tensor tanh_op(const Tensor& a) { return tanh(a); }
Tensor softmax_rows(const Tensor& a) { return softmax(a.view({1024, 1024}), 1); }

// ---- optimizer ----

// One AdamW step (lr 1e-3, wd 0.01) on a single fp32 parameter of 1M elements (in L3) or 16M
// (in memory). Traffic per element: read p, g, m, v; write p, m, v = 7 x 4 bytes.
void BM_AdamWStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = randn({n}).requires_grad_();
  p.set_grad(randn({n}));
  optim::AdamW opt({p});
  opt.step();  // allocates the moments outside the timed loop
  const Clock::time_point start = Clock::now();
  for (auto _ : state) opt.step();
  set_bandwidth(state, start, 7.0 * 4.0 * static_cast<double>(n));
}

// The same step on a bf16 parameter (bf16 moments: the `bf16-true` and `transformer-engine`
// precisions), which the update widens and narrows block by block. Traffic: 7 x 2 bytes.
void BM_AdamWStepBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = randn({n}).to(kBFloat16).requires_grad_();
  p.set_grad(randn({n}).to(kBFloat16));
  optim::AdamW opt({p});
  opt.step();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) opt.step();
  set_bandwidth(state, start, 7.0 * 2.0 * static_cast<double>(n));
}

// One AdamW step over the reference MLP's six parameters (784-1024-1024-10, 1.87M fp32
// elements): the multi-tensor pass the trainer runs every step.
void BM_AdamWStepMlp(benchmark::State& state) {
  std::vector<Tensor> params;
  for (const Shape& s :
       std::vector<Shape>{{1024, 784}, {1024}, {1024, 1024}, {1024}, {10, 1024}, {10}}) {
    Tensor p = randn(s).requires_grad_();
    p.set_grad(randn(s));
    params.push_back(p);
  }
  int64_t n = 0;
  for (const Tensor& p : params) n += p.numel();
  optim::AdamW opt(params);
  opt.step();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) opt.step();
  set_bandwidth(state, start, 7.0 * 4.0 * static_cast<double>(n));
}

// The Adam span kernel at the SSE2 baseline and at the widest level of this CPU, interleaved
// on the same 1M fp32 elements: widest/baseline is the SIMD speed-up of the update itself.
void BM_AdamSpanWidestVsBaseline(benchmark::State& state) {
  using namespace optim::detail;
  const SimdLevel widest = std::min(simd_level(), SimdLevel::kAvx512);
  const AdamSpanFn<float> base = adam_span_kernel<float>(SimdLevel::kScalar, false, false);
  const AdamSpanFn<float> wide = adam_span_kernel<float>(widest, false, false);
  std::vector<float> p(k1M, 0.5f), g(k1M, 0.25f), m(k1M, 0.0f), v(k1M, 0.0f);
  AdamCoeffs<float> c{1, 0.9f, 0.1f, 0.999f, 0.001f, -1e-3f, 0.03f, 1e-8f, 0, 1};
  double base_s = 0, wide_s = 0;
  for (auto _ : state) {
    Clock::time_point t0 = Clock::now();
    base(c, p.data(), g.data(), m.data(), v.data(), nullptr, k1M);
    Clock::time_point t1 = Clock::now();
    wide(c, p.data(), g.data(), m.data(), v.data(), nullptr, k1M);
    Clock::time_point t2 = Clock::now();
    base_s += std::chrono::duration<double>(t1 - t0).count();
    wide_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double bytes =
      7.0 * 4.0 * static_cast<double>(k1M) * static_cast<double>(state.iterations());
  state.counters["baseline_GB/s"] = bytes / base_s / 1e9;
  state.counters["widest_GB/s"] = bytes / wide_s / 1e9;
  state.counters["widest/baseline"] = base_s / wide_s;
  state.SetLabel(widest == SimdLevel::kAvx512 ? "AVX-512F"
                 : widest == SimdLevel::kAvx2 ? "AVX2"
                                              : "SSE2");
}

void common(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
}

BENCHMARK(BM_TinyAdd)->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(0.3);
BENCHMARK(BM_TinyAddRequiresGrad)->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(0.3);
BENCHMARK(BM_TinyAddForwardBackward)->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(0.3);
BENCHMARK_CAPTURE(BM_Add, f32, kFloat32)->Apply(common);
BENCHMARK_CAPTURE(BM_Add, bf16, kBFloat16)->Apply(common);
BENCHMARK_CAPTURE(BM_Unary, relu_f32, relu_op, kFloat32)->Apply(common);
BENCHMARK_CAPTURE(BM_Unary, exp_f32, exp_op, kFloat32)->Apply(common);
BENCHMARK_CAPTURE(BM_Unary, tanh_f32, tanh_op, kFloat32)->Apply(common);
BENCHMARK_CAPTURE(BM_Unary, softmax_f32, softmax_rows, kFloat32)->Apply(common);
BENCHMARK_CAPTURE(BM_Unary, softmax_bf16, softmax_rows, kBFloat16)->Apply(common);
BENCHMARK(BM_AdamWStep)->Arg(k1M)->Arg(int64_t{1} << 24)->Apply(common);
BENCHMARK(BM_AdamWStepBf16)->Arg(k1M)->Arg(int64_t{1} << 24)->Apply(common);
BENCHMARK(BM_AdamWStepMlp)->Apply(common);
BENCHMARK(BM_AdamSpanWidestVsBaseline)->Apply(common);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("mem_bw_gbps (measured, or MANTISSA_PEAK_MEM_GBPS)",
                              std::to_string(peak_mem_gbps()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
