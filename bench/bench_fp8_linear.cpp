// FP8 Linear (fp8::Linear under fp8 autocast, docs/fp8.md) forward + backward against the
// plain Linear under bf16-mixed autocast, at the MLP's and GPT's shapes, interleaved in one run
// (paired_timing.h) so the ratio holds on a loaded machine. Variants per shape:
//   bf16_mixed   nn::Linear, fp32 weights and input, bf16 autocast
//   fp8          fp8::Linear with bf16 weights and input (--precision transformer-engine), the
//                FP8 codes decoded inside the GEMM's packing on AVX2 (no fp32 operand copies)
//   fp8_unfused  the same layer with MANTISSA_GEMM=onednn semantics: codes widened to fp32
//                tensors, then the library GEMM (the path before the fused packing, and the one
//                CPUs without AVX2 take)
// Counters: <variant>_ms (median), <variant>_peak_MiB (tensor bytes one step allocates above
// what was held), fp8_speed_x_bf16_mixed = bf16_mixed_ms / fp8_ms (> 1: FP8 faster).
//
//   build/bench_fp8_linear --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "linear_shapes.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"
#include "paired_timing.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

void BM_Fp8VsBf16Mixed(benchmark::State& state, LinearShape sc) {
  manual_seed(0);
  auto ref = std::make_shared<nn::Linear>(sc.in, sc.out, true, kFloat32);
  auto f8 = std::make_shared<fp8::Linear>(sc.in, sc.out, true, kBFloat16, 16);
  Tensor x32 = randn({sc.tokens, sc.in});
  x32.requires_grad_(true);
  Tensor x16 = x32.detach().to(kBFloat16);
  x16.requires_grad_(true);
  const Tensor g32 = randn({sc.tokens, sc.out});
  const Tensor g16 = g32.to(kBFloat16);
  auto ref_step = [&] {
    Tensor y;
    {
      amp::autocast ac(DeviceType::kCPU, kBFloat16);
      y = (*ref)(x32);
    }
    y.backward(g32.to(y.dtype()));
    ref->zero_grad();
    x32.reset_grad();
  };
  fp8::DelayedScaling recipe;
  recipe.amax_history_len = 16;  // the layer's (another length would resize its history)
  auto fp8_step = [&] {
    Tensor y;
    {
      fp8::Fp8Autocast ac(true, recipe);
      y = (*f8)(x16);
    }
    y.backward(g16);
    f8->zero_grad();
    x16.reset_grad();
  };
  auto unfused_step = [&] {
    const kernels::GemmBackend saved = kernels::gemm_backend();
    kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
    fp8_step();
    kernels::set_gemm_backend(saved);
  };
  std::vector<PairedVariant> v = {
      {"bf16_mixed", ref_step}, {"fp8", fp8_step}, {"fp8_unfused", unfused_step}};
  run_paired(state, v);
  state.counters["fp8_speed_x_bf16_mixed"] = v[0].median_ms / v[1].median_ms;
  state.counters["fp8_unfused_speed_x_bf16_mixed"] = v[0].median_ms / v[2].median_ms;
}

const int registered = [] {
  for (const LinearShape& sc : kModelLinearShapes) {
    benchmark::RegisterBenchmark((std::string("Fp8LinearFwdBwd/") + sc.name).c_str(),
                                 BM_Fp8VsBf16Mixed, sc)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
