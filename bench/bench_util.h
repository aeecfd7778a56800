#pragma once
// Shared by the Google Benchmark programs: the machine's peaks (overridable from the
// environment) and wall-clock counters. Each benchmark times its own loop so the counters are
// plain numbers: Google Benchmark's rate counters would print "/s" after a fraction.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

namespace mantissa::bench {

// Nominal peaks of the development machine (2 cores of AMD Zen 4 / EPYC Genoa, which
// double-pumps 512-bit ops; measured with peak_probe.h at ~3.2 GHz): fp32 FMA ~200 GFLOP/s,
// bf16 dot products (VDPBF16PS) ~410 GFLOP/s, memory ~30 GB/s. bench_matmul also measures the
// arithmetic peaks while it runs; override these on other machines with the variables below.
inline constexpr double kPeakF32Gflops = 200.0;
inline constexpr double kPeakBF16Gflops = 410.0;
inline constexpr double kPeakMemGBps = 30.0;

// The value of environment variable `name` when it is a positive number, else `fallback`.
inline double peak_from_env(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return (end != v && d > 0) ? d : fallback;
}

// MANTISSA_PEAK_MEM_GBPS overrides it. 1M elements fit in L3, so their fraction can exceed 1.
inline double peak_mem_gbps() {
  static const double peak = peak_from_env("MANTISSA_PEAK_MEM_GBPS", kPeakMemGBps);
  return peak;
}

using Clock = std::chrono::steady_clock;

inline double seconds_per_iteration(const benchmark::State& state, Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count() /
         static_cast<double>(state.iterations());
}

// GB/s and its fraction of the memory bandwidth, from the bytes one iteration moves.
inline void set_bandwidth(benchmark::State& state, Clock::time_point start, double bytes) {
  const double gbps = bytes * 1e-9 / seconds_per_iteration(state, start);
  state.counters["GB/s"] = gbps;
  state.counters["of_mem_bw"] = gbps / peak_mem_gbps();
}

}  // namespace mantissa::bench
