// FP8 Linear (fp8::Linear under fp8 autocast, docs/fp8.md) forward + backward against the
// plain Linear in float32, bf16 weights and under bf16-mixed autocast, at the MLP's and GPT's
// shapes. Each run reports ms per forward+backward and, for the FP8 layer, its ratio to
// bf16-mixed (ratio > 1: FP8 is slower). On the CPU the FP8 GEMM is emulated (codes widened
// to fp32, fp32 GEMM, scales in the epilogue), so it pays the casts on top of an fp32 GEMM.
//
//   build/bench_fp8_linear --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "bench_util.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

enum class Mode { kFp32, kBf16, kBf16Mixed, kFp8Fp32, kFp8Bf16 };

struct ShapeCase {
  const char* name;
  int64_t tokens, in, out;
};
constexpr ShapeCase kShapes[] = {
    {"mlp_784x1024_b128", 128, 784, 1024},
    {"mlp_1024x1024_b128", 128, 1024, 1024},
    {"gpt_qkv_256x768_t2048", 2048, 256, 768},
    {"gpt_fc_256x1024_t2048", 2048, 256, 1024},
    {"gpt_proj_1024x256_t2048", 2048, 1024, 256},
};

std::map<std::string, double>& bf16_mixed_ms() {
  static std::map<std::string, double> m;
  return m;
}

void BM_LinearFwdBwd(benchmark::State& state, ShapeCase sc, Mode mode) {
  const bool fp8 = mode == Mode::kFp8Fp32 || mode == Mode::kFp8Bf16;
  const DType wdt = (mode == Mode::kBf16 || mode == Mode::kFp8Bf16) ? kBFloat16 : kFloat32;
  manual_seed(0);
  std::shared_ptr<nn::Module> layer;
  if (fp8) {
    layer = std::make_shared<fp8::Linear>(sc.in, sc.out, true, wdt, 16);
  } else {
    layer = std::make_shared<nn::Linear>(sc.in, sc.out, true, wdt);
  }
  Tensor x = randn({sc.tokens, sc.in}).to(wdt);
  x.requires_grad_(true);
  const Tensor g = randn({sc.tokens, sc.out}).to(wdt);
  auto step = [&] {
    Tensor y;
    {
      std::unique_ptr<amp::autocast> ac;
      std::unique_ptr<fp8::Fp8Autocast> f8;
      if (mode == Mode::kBf16Mixed) ac = std::make_unique<amp::autocast>(DeviceType::kCPU, kBFloat16);
      if (fp8) f8 = std::make_unique<fp8::Fp8Autocast>();
      y = (*layer)(x);
    }
    y.backward(g.to(y.dtype()));
    layer->zero_grad();
    x.reset_grad();
  };
  step();  // warm up: scales set, buffers allocated
  const Clock::time_point start = Clock::now();
  for (auto _ : state) step();
  const double ms = 1e3 * seconds_per_iteration(state, start);
  state.counters["ms"] = ms;
  state.counters["GFLOP/s"] = 6.0 * sc.tokens * sc.in * sc.out / (ms * 1e6);
  if (mode == Mode::kBf16Mixed) bf16_mixed_ms()[sc.name] = ms;
  if (fp8 && bf16_mixed_ms().count(sc.name)) {
    state.counters["x_bf16_mixed"] = ms / bf16_mixed_ms()[sc.name];
  }
}

const int registered = [] {
  const std::pair<Mode, const char*> modes[] = {{Mode::kFp32, "fp32"},
                                                {Mode::kBf16, "bf16_true"},
                                                {Mode::kBf16Mixed, "bf16_mixed"},
                                                {Mode::kFp8Fp32, "fp8_fp32_weights"},
                                                {Mode::kFp8Bf16, "fp8_bf16_weights"}};
  for (const ShapeCase& sc : kShapes) {
    for (const auto& [mode, mname] : modes) {
      benchmark::RegisterBenchmark((std::string("LinearFwdBwd/") + sc.name + "/" + mname).c_str(),
                                   BM_LinearFwdBwd, sc, mode)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
