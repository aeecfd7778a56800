// Conversion throughput in GB/s (bytes read + bytes written) for the bulk paths mantissa uses
// when casting tensors, and for GradScaler's unscale + inf-check pass, on 1M and 16M elements. The
// detected CPU features are printed in the context; MANTISSA_DISABLE_SIMD=... measures the slower
// paths. `--exhaustive` instead compares the bulk f32 -> FP8 conversion (the path this CPU, as
// capped by MANTISSA_DISABLE_SIMD, selects) with the scalar one on all 2^32 float bit patterns,
// both formats and both saturation modes, and exits non-zero on a mismatch.
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/float8.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/grad_scaler.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;

std::vector<float> random_floats(int64_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// bytes_per_second as Google Benchmark prints it, plus GB/s and its fraction of the memory
// bandwidth as plain counters (timed here, wall clock, since rate counters print "/s").
void set_bytes(benchmark::State& state, Clock::time_point start, int64_t n,
               int64_t bytes_per_element) {
  state.SetBytesProcessed(state.iterations() * n * bytes_per_element);
  state.SetItemsProcessed(state.iterations() * n);
  set_bandwidth(state, start, static_cast<double>(n * bytes_per_element));
}

void BM_F32ToBF16(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> src = random_floats(n);
  std::vector<uint16_t> dst(static_cast<size_t>(n));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    convert_f32_to_bf16(src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, start, n, 4 + 2);
}

void BM_BF16ToF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> f = random_floats(n);
  std::vector<uint16_t> src(static_cast<size_t>(n));
  convert_f32_to_bf16(f.data(), src.data(), n);
  std::vector<float> dst(static_cast<size_t>(n));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    convert_bf16_to_f32(src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, start, n, 2 + 4);
}

void BM_F32ToF16(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> src = random_floats(n);
  std::vector<uint16_t> dst(static_cast<size_t>(n));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    convert_f32_to_f16(src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, start, n, 4 + 2);
}

void BM_F16ToF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> f = random_floats(n);
  std::vector<uint16_t> src(static_cast<size_t>(n));
  convert_f32_to_f16(f.data(), src.data(), n);
  std::vector<float> dst(static_cast<size_t>(n));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    convert_f16_to_f32(src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, start, n, 2 + 4);
}

void BM_F32ToE4M3(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> src = random_floats(n);
  std::vector<uint8_t> dst(static_cast<size_t>(n));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    convert_f32_to_fp8(src.data(), dst.data(), n, kFloat8_e4m3fn);
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, start, n, 4 + 1);
}

// GradScaler::unscale_ over one fp32 gradient of n elements: each element read, checked for
// inf/NaN and written back times 1/scale (4 + 4 bytes). The scale alternates between 2 and 0.5
// so the gradient stays the same size from one iteration to the next.
void BM_UnscaleInfCheck(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = zeros({n}).requires_grad_();
  p.set_grad(randn({n}));
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 2.0});
  scaler.scale(ones({1}));  // creates the scale tensor, as scaling a loss does
  double next = 0.5;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    scaler.unscale_(opt);
    scaler.update(next);
    next = 1.0 / next;
  }
  set_bytes(state, start, n, 4 + 4);
}

constexpr int64_t k1M = int64_t{1} << 20;
constexpr int64_t k16M = int64_t{1} << 24;

BENCHMARK(BM_F32ToBF16)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BF16ToF32)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_F32ToF16)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_F16ToF32)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_F32ToE4M3)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnscaleInfCheck)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);

int exhaustive() {
  std::printf("conversion level: %s\n", simd_level_name(simd_level()));
  constexpr int64_t kChunk = int64_t{1} << 22;
  std::vector<float> x(kChunk);
  std::vector<uint8_t> fast(kChunk), exact(kChunk);
  int64_t total_bad = 0;
  for (const DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (const Fp8Saturation mode : {Fp8Saturation::kSatFinite, Fp8Saturation::kNoSat}) {
      uint8_t (*scalar)(float, Fp8Saturation) =
          fp8 == kFloat8_e4m3fn ? float_to_fp8_e4m3_bits : float_to_fp8_e5m2_bits;
      int64_t bad = 0;
      for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
#pragma omp parallel for
        for (int64_t i = 0; i < kChunk; ++i) {
          const auto b = static_cast<uint32_t>(base + static_cast<uint64_t>(i));
          std::memcpy(&x[i], &b, sizeof b);
          exact[i] = scalar(x[i], mode);
        }
        convert_f32_to_fp8(x.data(), fast.data(), kChunk, fp8, mode);
        if (std::memcmp(fast.data(), exact.data(), kChunk) == 0) continue;
        for (int64_t i = 0; i < kChunk; ++i) {
          if (fast[i] != exact[i] && ++bad <= 5) {
            std::printf("mismatch: %s, bits 0x%08x: bulk 0x%02x, scalar 0x%02x\n",
                        std::string(fp8.name()).c_str(), static_cast<unsigned>(base + i), fast[i],
                        exact[i]);
          }
        }
      }
      std::printf("%s %s: %lld mismatches over all 2^32 float bit patterns\n",
                  std::string(fp8.name()).c_str(),
                  mode == Fp8Saturation::kSatFinite ? "satfinite" : "no saturation",
                  static_cast<long long>(bad));
      total_bad += bad;
    }
  }
  return total_bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--exhaustive") return exhaustive();
  // Only the public surface here (benchmarks link the library like a user does).
  std::string features;
  std::istringstream lines(mantissa::describe_cpu_features());
  for (std::string line; std::getline(lines, line);) {
    if (line.ends_with(": yes")) features += line.substr(0, line.size() - 5) + " ";
  }
  benchmark::AddCustomContext("cpu_features", features.empty() ? "none" : features);
  benchmark::AddCustomContext("mem_bw_gbps (measured, or MANTISSA_PEAK_MEM_GBPS)",
                              std::to_string(peak_mem_gbps()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
