// Matrix-product throughput through mantissa::matmul, the path every Linear layer takes, beside
// oneDNN called directly for the same shape in the same run.
//
// Each benchmark iteration runs, in turn: a short burst of the peak probe (peak_probe.h: the
// machine's fp32 FMA or bf16 dot-product peak at this moment, all threads), one mantissa product
// as routed by MANTISSA_GEMM (default auto), the same product forced onto the native AVX-512
// GEMM, one raw oneDNN product and one pre-packed oneDNN product. Counters: GFLOP/s (2*M*N*K per
// product) of mantissa's product; of_peak, that over the measured peak of the same iterations;
// of_peak_cpu, the same per CPU second on both sides (robust to time lost to neighbours);
// of_nominal, over the constant (or MANTISSA_PEAK_*_GFLOPS) peak; native_GFLOP/s and
// native/raw; raw_GFLOP/s and ours/raw; packed_GFLOP/s and ours/packed. The machine is shared,
// so absolute numbers drift with the neighbours' load; the ratios, measured on interleaved
// calls, do much less.
//
// Shapes: squares 256^3 .. 4096^3 (the kernel's ceiling); the MLP 784-1024-1024-10 at batch 256
// (per layer the forward x W^T, the input gradient dY W and the weight gradient dY^T x); the
// GPT's (2048 tokens x d 256: QKV 256->768, MLP 256->1024 and 1024->256), the ViT's (4 352 tokens
// x d 128: QKV 128->384, proj 128->128, MLP 128->256->128) and its attention
// scores (128 = 16 x 8 heads of [128,32] @ [32,128]) and attention @ V; BM_MatmulWidening
// gives bf16/f16-operand cost over f32 at those shapes. On an AVX2 CPU (or with
// MANTISSA_DISABLE_SIMD=avx512f) "native" is the AVX2 kernel and the peak is the ymm FMA peak.
// BM_WeightGradWidened: a weight gradient under autocast widened in the GEMM's epilogue against
// the bf16 product and a widening pass.
//
//   build-bench/bench_matmul                                   # everything, ~60 s
//   build-bench/bench_matmul --benchmark_filter=Square/.*/2048 # the targets
//   MANTISSA_GEMM=onednn build-bench/bench_matmul             # route mantissa's products to oneDNN
//   MANTISSA_PEAK_F32_GFLOPS=... MANTISSA_PEAK_BF16_GFLOPS=... build-bench/bench_matmul
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "mantissa/mantissa.h"
#include "ops/matmul_impl.h"
#include "peak_probe.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

// A probe burst of ~0.3-1 ms per iteration: short beside the products, long enough to time.
constexpr int64_t kProbeIters = 40000;

// f16 has no native dot product here (operands are widened to fp32), so its fraction is
// reported against the fp32 peak.
double nominal_peak_gflops(DType dtype) {
  static const double f32 = peak_from_env("MANTISSA_PEAK_F32_GFLOPS", kPeakF32Gflops);
  static const double bf16 = peak_from_env("MANTISSA_PEAK_BF16_GFLOPS", kPeakBF16Gflops);
  return dtype == kBFloat16 ? bf16 : f32;
}

// A raw oneDNN matmul [batch, m, k] @ [batch, k, n] with plain layouts (b optionally stored
// transposed, as a Linear weight is) and its buffers, created once.
struct RawOnednn {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  dnnl::memory a, b, c;

  // packed: b in the layout oneDNN prefers (format_tag::any, reordered once before timing),
  // as a library that keeps weights pre-packed between steps could use for the forward GEMM.
  RawOnednn(DType dtype, int64_t batch, int64_t m, int64_t k, int64_t n, bool a_t, bool b_t,
            bool packed = false) {
    using dt = dnnl::memory::data_type;
    // f16 (and bf16 where oneDNN has no bf16 kernels, i.e. without AVX-512) -> the f32
    // product of its widening, which is what mantissa's oneDNN route runs.
    const dt t = dtype == kBFloat16 && kernels::onednn_supports_bf16() ? dt::bf16 : dt::f32;
    const dnnl::memory::desc ad(
        {batch, m, k}, t, a_t ? dnnl::memory::dims{m * k, 1, m} : dnnl::memory::dims{m * k, k, 1});
    const dnnl::memory::desc bd(
        {batch, k, n}, t, b_t ? dnnl::memory::dims{k * n, 1, k} : dnnl::memory::dims{k * n, n, 1});
    const dnnl::memory::desc cd({batch, m, n}, t, dnnl::memory::format_tag::abc);
    const dnnl::memory::desc bany({batch, k, n}, t, dnnl::memory::format_tag::any);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, packed ? bany : bd, cd), eng);
    prim = dnnl::matmul(pd);
    a = dnnl::memory(ad, eng);
    b = dnnl::memory(pd.weights_desc(), eng);
    c = dnnl::memory(cd, eng);
    // Fill with small values so the products never see denormals or NaNs.
    for (dnnl::memory* mem : {&a, &b}) {
      const size_t bytes = mem->get_desc().get_size();
      std::memset(mem->get_data_handle(), 0, bytes);
      if (t == dt::f32) {
        auto* p = static_cast<float*>(mem->get_data_handle());
        for (size_t i = 0; i < bytes / 4; ++i) p[i] = static_cast<float>(i % 7) * 0.125f;
      } else {
        auto* p = static_cast<uint16_t*>(mem->get_data_handle());
        for (size_t i = 0; i < bytes / 2; ++i) p[i] = 0x3e00;  // bf16 0.125
      }
    }
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};

// Times c = a @ b with a: [batch, m, k] and b: [batch, k, n] (a_t / b_t: the operand is the
// transpose view of a contiguous tensor, as Linear's forward uses its weight), interleaved
// with the raw oneDNN product of the same shape.
void run_matmul(benchmark::State& state, DType dtype, int64_t batch, int64_t m, int64_t k,
                int64_t n, bool a_t, bool b_t) {
  NoGradGuard no_grad;
  auto make = [&](int64_t rows, int64_t cols, bool transposed) {
    Shape s = transposed ? Shape{cols, rows} : Shape{rows, cols};
    if (batch > 1) s.insert(s.begin(), batch);
    Tensor x = randn(s).to(dtype);
    return transposed ? x.transpose(-1, -2) : x;
  };
  Tensor a = make(m, k, a_t), b = make(k, n, b_t);
  RawOnednn raw(dtype, batch, m, k, n, a_t, b_t);
  RawOnednn packed(dtype, batch, m, k, n, a_t, b_t, true);
  const bool native = kernels::gemm_native_supported(dtype);
  Tensor warm = matmul(a, b);  // primitive creation outside the timing
  raw.run();
  packed.run();
  // One product with the backend forced to `backend`, restoring the process-wide choice.
  auto forced = [&](kernels::GemmBackend backend) {
    const kernels::GemmBackend before = kernels::gemm_backend();
    kernels::set_gemm_backend(backend);
    Tensor c = matmul(a, b);
    kernels::set_gemm_backend(before);
    return c;
  };
  if (native) warm = forced(kernels::GemmBackend::kNative);
  // bf16 products run on VDPBF16PS only with AVX-512 BF16; elsewhere they are fp32 FMAs.
  const bool bf16_peak = dtype == kBFloat16 && simd_level() >= SimdLevel::kAvx512Bf16;
  double ours = 0, theirs = 0, theirs_packed = 0, mine = 0, ours_cpu = 0;
  double probe_gflops_sum = 0, probe_cpu_gflops_sum = 0;
  int64_t probes = 0;
  for (auto _ : state) {
    if (auto p = measure_peak(bf16_peak, kProbeIters)) {
      probe_gflops_sum += p->gflops;
      probe_cpu_gflops_sum += p->gflops_per_cpu;
      ++probes;
    }
    const double c0 = process_cpu_seconds();
    auto t0 = Clock::now();
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    auto t1 = Clock::now();
    ours_cpu += process_cpu_seconds() - c0;
    if (native) {
      Tensor cn = forced(kernels::GemmBackend::kNative);
      benchmark::DoNotOptimize(cn.data_ptr());
    }
    auto t2 = Clock::now();
    raw.run();
    auto t3 = Clock::now();
    packed.run();
    auto t4 = Clock::now();
    ours += std::chrono::duration<double>(t1 - t0).count();
    mine += std::chrono::duration<double>(t2 - t1).count();
    theirs += std::chrono::duration<double>(t3 - t2).count();
    theirs_packed += std::chrono::duration<double>(t4 - t3).count();
  }
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) *
                       static_cast<double>(n) * static_cast<double>(k) *
                       static_cast<double>(state.iterations());
  const double gflops = flops / ours * 1e-9, raw_gflops = flops / theirs * 1e-9;
  const double packed_gflops = flops / theirs_packed * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  if (probes > 0) {
    const double peak = probe_gflops_sum / static_cast<double>(probes);
    state.counters["peak_GFLOP/s"] = peak;
    state.counters["of_peak"] = gflops / peak;
    // Per CPU second on both sides: the kernel's efficiency while it had the cores, which a
    // busy neighbour barely moves (run with OMP_WAIT_POLICY=passive so idle threads sleep).
    state.counters["of_peak_cpu"] =
        (flops / ours_cpu * 1e-9) / (probe_cpu_gflops_sum / static_cast<double>(probes));
  }
  state.counters["of_nominal"] = gflops / nominal_peak_gflops(dtype);
  if (native) {
    const double native_gflops = flops / mine * 1e-9;
    state.counters["native_GFLOP/s"] = native_gflops;
    state.counters["native/raw"] = native_gflops / raw_gflops;
  }
  state.counters["raw_GFLOP/s"] = raw_gflops;
  state.counters["ours/raw"] = gflops / raw_gflops;
  state.counters["packed_GFLOP/s"] = packed_gflops;
  state.counters["ours/packed"] = gflops / packed_gflops;
  state.SetLabel(std::string(dtype.name()));
}

void BM_MatmulSquare(benchmark::State& state, DType dtype) {
  const int64_t s = state.range(0);
  run_matmul(state, dtype, 1, s, s, s, false, false);
}

// The three GEMMs of one Linear(in -> out) at batch B:
//   0 forward        y  = x W^T     [B,in] x [in,out]   (W stored [out,in])
//   1 input grad     dx = dY W      [B,out] x [out,in]
//   2 weight grad    dW = dY^T x    [out,B] x [B,in]    (dY^T a transposed view)
void linear_gemm(benchmark::State& state, DType dtype, int64_t B) {
  const int64_t in = state.range(0), out = state.range(1), which = state.range(2);
  switch (which) {
    case 0:
      run_matmul(state, dtype, 1, B, in, out, false, true);
      break;
    case 1:
      run_matmul(state, dtype, 1, B, out, in, false, false);
      break;
    default:
      run_matmul(state, dtype, 1, out, B, in, true, false);
      break;
  }
}

void BM_MatmulMLP(benchmark::State& state, DType dtype) { linear_gemm(state, dtype, 256); }
void BM_MatmulGPT(benchmark::State& state, DType dtype) { linear_gemm(state, dtype, 2048); }
void BM_MatmulViT(benchmark::State& state, DType dtype) { linear_gemm(state, dtype, 4352); }

// The reference models' classifier heads, forward (x W^T, 10 outputs): (batch, in) = the MLP's
// (256, 1024), the CNN's (128, 128) and the ViT's (256, 128). On AVX2 these take the
// narrow-output dot-product kernel (gemm_native.h, kAvx2NarrowMaxN).
void BM_MatmulHead(benchmark::State& state, DType dtype) {
  run_matmul(state, dtype, 1, state.range(0), state.range(1), 10, false, true);
}

void head_args(benchmark::internal::Benchmark* b) {
  b->Args({256, 1024})->Args({128, 128})->Args({256, 128});
  b->ArgNames({"batch", "in"})->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

// Attention scores q @ k^T for 16 sequences x 8 heads: [128, 128, 32] @ [128, 32, 128].
void BM_MatmulAttention(benchmark::State& state, DType dtype) {
  run_matmul(state, dtype, 128, 128, 32, 128, false, true);
}

// Attention's second product, probabilities @ V: [128, 128, 128] @ [128, 128, 32].
void BM_MatmulAttentionAV(benchmark::State& state, DType dtype) {
  run_matmul(state, dtype, 128, 128, 128, 32, false, false);
}

// What bf16 and f16 operands cost over f32 for one shape, as routed by MANTISSA_GEMM: each
// iteration runs the f32, bf16 and f16 products in turn (low-precision results), so the
// ratios come from interleaved calls of one run. Without bf16/f16 arithmetic (AVX2) the goal
// is bf16/f32 and f16/f32 >= 0.95: the operands are widened inside the GEMM's packing.
// Args: (M, K, N, b transposed, a transposed).
void BM_MatmulWidening(benchmark::State& state) {
  NoGradGuard no_grad;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool b_t = state.range(3) != 0, a_t = state.range(4) != 0;
  const Tensor a32 = a_t ? randn({k, m}).t() : randn({m, k});
  const Tensor b32 = b_t ? randn({n, k}).t() : randn({k, n});
  const Tensor a16 = a_t ? a32.t().to(kBFloat16).t() : a32.to(kBFloat16);
  const Tensor ah = a_t ? a32.t().to(kFloat16).t() : a32.to(kFloat16);
  const Tensor b16 = b_t ? b32.t().to(kBFloat16).t() : b32.to(kBFloat16);
  const Tensor bh = b_t ? b32.t().to(kFloat16).t() : b32.to(kFloat16);
  Tensor warm = matmul(a32, b32);
  warm = matmul(a16, b16);
  warm = matmul(ah, bh);
  double t32 = 0, t16 = 0, th = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    Tensor c = matmul(a32, b32);
    benchmark::DoNotOptimize(c.data_ptr());
    auto t1 = Clock::now();
    c = matmul(a16, b16);
    benchmark::DoNotOptimize(c.data_ptr());
    auto t2 = Clock::now();
    c = matmul(ah, bh);
    benchmark::DoNotOptimize(c.data_ptr());
    auto t3 = Clock::now();
    t32 += std::chrono::duration<double>(t1 - t0).count();
    t16 += std::chrono::duration<double>(t2 - t1).count();
    th += std::chrono::duration<double>(t3 - t2).count();
  }
  const double flops = 2.0 * static_cast<double>(m * n) * static_cast<double>(k) *
                       static_cast<double>(state.iterations());
  state.counters["f32_GFLOP/s"] = flops / t32 * 1e-9;
  state.counters["bf16_GFLOP/s"] = flops / t16 * 1e-9;
  state.counters["f16_GFLOP/s"] = flops / th * 1e-9;
  state.counters["bf16/f32"] = t32 / t16;  // speed ratios: 1 = no cost
  state.counters["f16/f32"] = t32 / th;
}

// The MLP's and the GPT's Linear GEMMs (forward x W^T with the weight transposed, input and
// weight gradients), and 1024^3; then the ViT's (4 352 tokens): each layer's forward, input
// gradient and weight gradient (dY^T X, A transposed).
void widening_args(benchmark::internal::Benchmark* b) {
  b->Args({1024, 1024, 1024, 0, 0});
  b->Args({256, 784, 1024, 1, 0});
  b->Args({256, 1024, 1024, 1, 0});
  b->Args({256, 1024, 10, 1, 0});
  b->Args({256, 1024, 784, 0, 0});
  b->Args({2048, 256, 768, 1, 0});
  b->Args({2048, 1024, 256, 1, 0});
  for (auto [in, out] :
       {std::pair<int64_t, int64_t>{128, 384}, {128, 128}, {128, 256}, {256, 128}}) {
    b->Args({4352, in, out, 1, 0});
    b->Args({4352, out, in, 0, 0});
    b->Args({out, 4352, in, 0, 1});
  }
  b->ArgNames({"m", "k", "n", "b_t", "a_t"})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(0.3);
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

// The GPT (d 256, 2048 tokens per batch): QKV projection, MLP up and down.
void gpt_args(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{256, 768}, {256, 1024}, {1024, 256}}) {
    for (int64_t which : {0, 1, 2}) b->Args({in, out, which});
  }
  b->ArgNames({"in", "out", "gemm"})->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

// The ViT (width 128, MLP 256, 4 352 tokens: 256 images x 17): qkv, proj, MLP up and down.
void vit_args(benchmark::internal::Benchmark* b) {
  for (auto [in, out] :
       {std::pair<int64_t, int64_t>{128, 384}, {128, 128}, {128, 256}, {256, 128}}) {
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
BENCHMARK_CAPTURE(BM_MatmulGPT, f32, kFloat32)->Apply(gpt_args);
BENCHMARK_CAPTURE(BM_MatmulGPT, bf16, kBFloat16)->Apply(gpt_args);
BENCHMARK_CAPTURE(BM_MatmulGPT, f16, kFloat16)->Apply(gpt_args);
BENCHMARK_CAPTURE(BM_MatmulViT, f32, kFloat32)->Apply(vit_args);
BENCHMARK_CAPTURE(BM_MatmulHead, f32, kFloat32)->Apply(head_args);
BENCHMARK_CAPTURE(BM_MatmulHead, bf16, kBFloat16)->Apply(head_args);
BENCHMARK_CAPTURE(BM_MatmulHead, f16, kFloat16)->Apply(head_args);
BENCHMARK_CAPTURE(BM_MatmulAttention, f32, kFloat32)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK_CAPTURE(BM_MatmulAttention, bf16, kBFloat16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK_CAPTURE(BM_MatmulAttention, f16, kFloat16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK_CAPTURE(BM_MatmulAttentionAV, f32, kFloat32)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK(BM_MatmulWidening)->Apply(widening_args);

// A Linear's weight gradient under autocast, dW = dY^T x with bf16 operands, as float32 (what
// the cached weight cast's backward hands on): the bf16 product then a widening pass (the path
// before 2026-11-26, and still the path where the native AVX2 GEMM does not run it) against
// detail::matmul_nograd_widened, which on the AVX2 GEMM rounds in the epilogue and stores fp32
// (GemmArgs::round_to). Interleaved calls; `widened/narrow` is the speed ratio (> 1: faster).
// Args: (out, rows, in), the MLP's, GPT's and ViT's weight gradients.
void BM_WeightGradWidened(benchmark::State& state) {
  NoGradGuard no_grad;
  const int64_t out = state.range(0), rows = state.range(1), in = state.range(2);
  const Tensor dy = randn({rows, out}).to(kBFloat16), x = randn({rows, in}).to(kBFloat16);
  Tensor warm = detail::matmul_nograd_widened(dy.t(), x);
  warm = detail::matmul_nograd(dy.t(), x).to(kFloat32);
  double narrow = 0, widened = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    Tensor a = detail::matmul_nograd(dy.t(), x).to(kFloat32);
    benchmark::DoNotOptimize(a.data_ptr());
    auto t1 = Clock::now();
    Tensor b = detail::matmul_nograd_widened(dy.t(), x);
    benchmark::DoNotOptimize(b.data_ptr());
    auto t2 = Clock::now();
    narrow += std::chrono::duration<double>(t1 - t0).count();
    widened += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["narrow_ms"] = 1e3 * narrow / state.iterations();
  state.counters["widened_ms"] = 1e3 * widened / state.iterations();
  state.counters["widened/narrow"] = narrow / widened;
}
BENCHMARK(BM_WeightGradWidened)
    ->Args({1024, 256, 784})
    ->Args({1024, 256, 1024})
    ->Args({768, 2048, 256})
    ->Args({1024, 2048, 256})
    ->Args({256, 2048, 1024})
    ->Args({384, 4352, 128})
    ->Args({128, 4352, 256})
    ->ArgNames({"out", "rows", "in"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

}  // namespace

int main(int argc, char** argv) {
  auto peak_str = [](bool bf16) {
    const auto p = measure_peak(bf16, 400000);
    return p ? std::to_string(p->gflops)
             : std::string(bf16 ? "n/a (no AVX-512 BF16)" : "n/a (no AVX2+FMA)");
  };
  benchmark::AddCustomContext("measured_peak_f32_gflops_at_start", peak_str(false));
  benchmark::AddCustomContext("measured_peak_bf16_gflops_at_start", peak_str(true));
  benchmark::AddCustomContext("nominal_peak_f32_gflops",
                              std::to_string(nominal_peak_gflops(kFloat32)));
  benchmark::AddCustomContext("nominal_peak_bf16_gflops",
                              std::to_string(nominal_peak_gflops(kBFloat16)));
  benchmark::AddCustomContext("f16_fraction_against", "fp32 peak (f16 is widened to fp32)");
  benchmark::AddCustomContext("gemm_backend", kernels::gemm_backend_name(kernels::gemm_backend()));
  benchmark::AddCustomContext("raw", "oneDNN matmul called directly, same shape, interleaved");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
