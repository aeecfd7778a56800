// int8-training's Linear (quant::Linear8bitLt in training mode, --precision int8-training,
// docs/quantization.md) forward + backward against the plain Linear under bf16-mixed autocast,
// at the MLP's and GPT's shapes, interleaved in one run (paired_timing.h) so the ratio holds on
// a loaded machine. Variants per shape:
//   bf16_mixed     nn::Linear, fp32 weight and input, bf16 autocast
//   int8_training  Linear8bitLt (fp32 weight, bf16 compute, outlier threshold 6) under bf16
//                  autocast, as the precision builds it: the forward product in int8
//   int8_gemm      the forward's int8 x int8 -> int32 product alone (kernels/cpu/quant/
//                  int8_rowwise.h) on codes quantized once, packing included
// Counters: <variant>_ms (median), <variant>_peak_MiB, int8_speed_x_bf16_mixed =
// bf16_mixed_ms / int8_training_ms (> 1: int8 faster), int8_gemm_GMACs = multiply-adds per
// second of int8_gemm (1e9).
//
//   OMP_NUM_THREADS=1 MANTISSA_DISABLE_SIMD=avx512f build-bench/bench_int8_linear
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/quant/int8_rowwise.h"
#include "linear_shapes.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/mantissa.h"
#include "mantissa/quant/int8.h"
#include "mantissa/quant/linear8bit.h"
#include "paired_timing.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

void BM_Int8VsBf16Mixed(benchmark::State& state, LinearShape sc) {
  manual_seed(0);
  auto ref = std::make_shared<nn::Linear>(sc.in, sc.out, true, kFloat32);
  auto q = quant::Linear8bitLt::from_linear(
      *ref, quant::Linear8bitOptions{
                .mode = quant::Int8Mode::kTraining, .threshold = 6.0f, .compute_dtype = kBFloat16});
  Tensor x = randn({sc.tokens, sc.in});
  x.requires_grad_(true);
  const Tensor g = randn({sc.tokens, sc.out});
  auto step = [&](nn::Module& m) {
    Tensor y;
    {
      amp::autocast ac(DeviceType::kCPU, kBFloat16);
      y = m.forward(x);
    }
    y.backward(g.to(y.dtype()));
    m.zero_grad();
    x.reset_grad();
  };
  const quant::Int8Rows qa = quant::quantize_int8_rows(x, 0.0f);
  const quant::Int8Rows qw = quant::quantize_int8_rows(ref->weight, 0.0f);
  std::vector<int32_t> acc(static_cast<size_t>(sc.tokens * sc.out));
  std::vector<PairedVariant> v = {{"bf16_mixed", [&] { step(*ref); }},
                                  {"int8_training", [&] { step(*q); }},
                                  {"int8_gemm", [&] {
                                     kernels::quant::int8_gemm_nt(
                                         qa.codes.data<int8_t>(), qw.codes.data<int8_t>(),
                                         sc.tokens, sc.out, sc.in, acc.data());
                                   }}};
  run_paired(state, v);
  state.counters["int8_speed_x_bf16_mixed"] = v[0].median_ms / v[1].median_ms;
  state.counters["int8_gemm_GMACs"] =
      static_cast<double>(sc.tokens * sc.in * sc.out) / (v[2].median_ms * 1e6);
}

const int registered = [] {
  for (const LinearShape& sc : kModelLinearShapes) {
    benchmark::RegisterBenchmark((std::string("Int8LinearFwdBwd/") + sc.name).c_str(),
                                 BM_Int8VsBf16Mixed, sc)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
