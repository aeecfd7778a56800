// quant::Linear4bit (NF4 with double quantization, bf16 compute: --precision nf4-dq) forward +
// backward w.r.t. the input (the QLoRA case: frozen weight) against nn::Linear with bf16
// weights and the same input-gradient-only backward, at the MLP's and GPT's shapes with
// batch >= 64 (the last two: the QLoRA benchmark's 100M GPT, width 768, 4 x 128 tokens),
// interleaved in one run (paired_timing.h). Variants per shape:
//   bf16         nn::Linear, bf16 weight (frozen) and input
//   nf4          Linear4bit on the CPU's path (src/gemm/four_bit_products.h): blocks decoded
//                inside the GEMM's packing on AVX2, AMX tiles up to 768 rows, else chunks of at
//                most 1 MiB of dequantised weight
//   nf4_unfused  the same layer with MANTISSA_GEMM=onednn semantics: on AVX2, the chunks of
//                dequantised weight and the library GEMM instead of the fused packing
// Counters: <variant>_ms (median), <variant>_peak_MiB (tensor bytes one step allocates above
// what was held), nf4_speed_x_bf16 = bf16_ms / nf4_ms (> 1: 4-bit faster).
//
//   build/bench_linear4bit --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "linear_shapes.h"
#include "mantissa/mantissa.h"
#include "mantissa/quant/linear4bit.h"
#include "paired_timing.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

constexpr LinearShape kShapes[] = {
    {"mlp_784x1024_b64", 64, 784, 1024},          {"mlp_784x1024_b256", 256, 784, 1024},
    {"mlp_1024x1024_b256", 256, 1024, 1024},      {"gpt_qkv_256x768_t2048", 2048, 256, 768},
    {"gpt_fc_256x1024_t2048", 2048, 256, 1024},   {"gpt_proj_1024x256_t2048", 2048, 1024, 256},
    {"gpt100m_fc_768x3072_t512", 512, 768, 3072}, {"gpt100m_proj_3072x768_t512", 512, 3072, 768},
};

void BM_Nf4VsBf16(benchmark::State& state, LinearShape sc) {
  manual_seed(0);
  auto lin = std::make_shared<nn::Linear>(sc.in, sc.out, true, kFloat32);
  auto q = quant::Linear4bit::from_linear(*lin, {FormatId::kNf4, true, kBFloat16});
  auto ref = std::make_shared<nn::Linear>(sc.in, sc.out, true, kBFloat16);
  ref->weight.requires_grad_(false);  // input gradient only, as the 4-bit layer
  Tensor x = randn({sc.tokens, sc.in}).to(kBFloat16);
  x.requires_grad_(true);
  const Tensor g = randn({sc.tokens, sc.out}).to(kBFloat16);
  auto step = [&](nn::Module& layer) {
    Tensor y = layer.forward(x);
    y.backward(g);
    x.reset_grad();
    layer.zero_grad();
  };
  auto unfused = [&] {
    const kernels::GemmBackend saved = kernels::gemm_backend();
    kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
    step(*q);
    kernels::set_gemm_backend(saved);
  };
  std::vector<PairedVariant> v = {
      {"bf16", [&] { step(*ref); }}, {"nf4", [&] { step(*q); }}, {"nf4_unfused", unfused}};
  run_paired(state, v);
  state.counters["nf4_speed_x_bf16"] = v[0].median_ms / v[1].median_ms;
  state.counters["nf4_unfused_speed_x_bf16"] = v[0].median_ms / v[2].median_ms;
}

const bool registered = [] {
  for (const auto& sc : kShapes)
    benchmark::RegisterBenchmark((std::string("Linear4bitFwdBwd/") + sc.name).c_str(), BM_Nf4VsBf16,
                                 sc)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
