// The 8-bit Adam codes on their own (kernels/cpu/optim/adam8bit_kernels.h): ns per value to
// encode one moment with the AVX2 codec and with the scalar table path, over one
// 4096-value array in cache (Adam-like values scaled by their absmax). With --exhaustive it
// instead compares the AVX2 encoder with the scalar one on all 2^32 float bit patterns, for
// both moments (about a minute per moment on one core), and prints the mismatches.
//
//   ninja -C build-bench -j2 bench_adam8bit_codec && build-bench/bench_adam8bit_codec
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "mantissa/core/cpu_features.h"

namespace {

namespace ko = mantissa::kernels::optim;

constexpr int64_t kValues = 4096;

// Moments as the optimizer sees them: m ~ N(0, 1e-3), v = m^2; and 1 / absmax.
struct Values {
  std::vector<float> x;
  float inv;
  explicit Values(bool first_moment) : x(kValues) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    float amax = 0.0f;
    for (float& v : x) {
      v = normal(rng) * 1e-3f;
      if (!first_moment) v = v * v;
      amax = std::max(amax, std::fabs(v));
    }
    inv = 1.0f / amax;
  }
};

void BM_Encode(benchmark::State& state) {
  const bool first = state.range(0) != 0, avx2 = state.range(1) != 0;
  if (avx2 && mantissa::simd_level() < mantissa::SimdLevel::kAvx2) {
    state.SkipWithError("no AVX2");
    return;
  }
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  Values v(first);
  std::vector<uint8_t> q(kValues);
  for (auto _ : state) {
    if (avx2)
      ko::adam8bit_encode_avx2(maps, first, v.x.data(), v.inv, q.data(), kValues);
    else
      ko::adam8bit_encode_scalar(maps, first, v.x.data(), v.inv, q.data(), kValues);
    benchmark::DoNotOptimize(q.data());
  }
  state.counters["ns/value"] =
      benchmark::Counter(static_cast<double>(kValues) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_Encode)
    ->ArgNames({"first_moment", "avx2"})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({0, 0});

int exhaustive() {
  if (mantissa::simd_level() < mantissa::SimdLevel::kAvx2) {
    std::printf("no AVX2 on this CPU: nothing to compare\n");
    return 0;
  }
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> x(kChunk);
  std::vector<uint8_t> fast(kChunk), exact(kChunk);
  int64_t total_bad = 0;
  for (bool first : {true, false}) {
    int64_t bad = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += kChunk) {
      for (int64_t i = 0; i < kChunk; ++i) {
        const uint32_t b = static_cast<uint32_t>(base + i);
        std::memcpy(&x[i], &b, sizeof b);
      }
      ko::adam8bit_encode_avx2(maps, first, x.data(), 1.0f, fast.data(), kChunk);
      ko::adam8bit_encode_scalar(maps, first, x.data(), 1.0f, exact.data(), kChunk);
      if (std::memcmp(fast.data(), exact.data(), kChunk) == 0) continue;
      for (int64_t i = 0; i < kChunk; ++i)
        if (fast[i] != exact[i] && ++bad <= 5)
          std::printf("mismatch: %s moment, bits 0x%08x: avx2 %d, scalar %d\n",
                      first ? "first" : "second", static_cast<unsigned>(base + i), fast[i],
                      exact[i]);
    }
    std::printf("%s moment: %lld mismatches over all 2^32 float bit patterns\n",
                first ? "first" : "second", static_cast<long long>(bad));
    total_bad += bad;
  }
  return total_bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--exhaustive") return exhaustive();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
