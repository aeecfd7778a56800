// The 4-bit Linear's forward with few input rows (generation: one row per token, a prompt's
// rows at prefill), under no_grad, at SmolLM-135M's and TinyLlama-1.1B's projection shapes,
// interleaved in one run (paired_timing.h). Variants per shape and row count:
//   bf16        nn::Linear with a bf16 weight
//   nf4         quant::Linear4bit (NF4, double-quantized absmax, bf16 compute) on the dispatch's
//               choice: up to kFourBitGemvMaxRows rows, the codes decoded in registers
//               (kernels/cpu/quant/four_bit_gemv.h)
//   nf4_onednn  the same layer with MANTISSA_GEMM=onednn: the weight decoded to bf16 a chunk at
//               a time, then oneDNN
// Counters: <variant>_ms (median), nf4_speed_x_bf16 = bf16_ms / nf4_ms and
// nf4_speed_x_onednn = nf4_onednn_ms / nf4_ms (> 1: the default path faster). The row count
// where nf4_speed_x_onednn falls below 1 is where the dispatch stops taking the kernel.
//
//   build-bench/bench_four_bit_gemv --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "mantissa/mantissa.h"
#include "mantissa/quant/linear4bit.h"
#include "paired_timing.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

struct ShapeCase {
  const char* name;
  int64_t in, out;
};
constexpr ShapeCase kShapes[] = {
    {"smollm_up_576x1536", 576, 1536},
    {"smollm_down_1536x576", 1536, 576},
    {"tinyllama_up_2048x5632", 2048, 5632},
};
constexpr int64_t kRows[] = {1, 2, 4, 8, 16, 32};

void BM_FewRows(benchmark::State& state, ShapeCase sc, int64_t rows) {
  manual_seed(0);
  NoGradGuard no_grad;
  auto lin = std::make_shared<nn::Linear>(sc.in, sc.out, false, kFloat32);
  auto q = quant::Linear4bit::from_linear(*lin, {FormatId::kNf4, true, kBFloat16});
  auto ref = std::make_shared<nn::Linear>(sc.in, sc.out, false, kBFloat16);
  const Tensor x = randn({rows, sc.in}).to(kBFloat16);
  auto onednn = [&] {
    const kernels::GemmBackend saved = kernels::gemm_backend();
    kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
    benchmark::DoNotOptimize(q->forward(x));
    kernels::set_gemm_backend(saved);
  };
  std::vector<PairedVariant> v = {{"bf16", [&] { benchmark::DoNotOptimize(ref->forward(x)); }},
                                  {"nf4", [&] { benchmark::DoNotOptimize(q->forward(x)); }},
                                  {"nf4_onednn", onednn}};
  run_paired(state, v);
  state.counters["nf4_speed_x_bf16"] = v[0].median_ms / v[1].median_ms;
  state.counters["nf4_speed_x_onednn"] = v[2].median_ms / v[1].median_ms;
}

const bool registered = [] {
  for (const auto& sc : kShapes)
    for (int64_t rows : kRows)
      benchmark::RegisterBenchmark(
          (std::string("Linear4bitForward/") + sc.name + "/rows" + std::to_string(rows)).c_str(),
          BM_FewRows, sc, rows)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
