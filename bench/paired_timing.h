#pragma once
// Interleaved timing of a few variants of one step, for ratios that hold on a loaded machine:
// every benchmark iteration runs each variant once, in an order that rotates, so a neighbour's
// load falls on all of them alike; each variant's time is the median of its runs. Also the
// peak tensor memory of one step of each variant (counting allocator).
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "mantissa/core/allocator.h"

namespace mantissa::bench {

struct PairedVariant {
  std::string name;
  std::function<void()> step;
  double median_ms = 0;
  double peak_mib = 0;  // tensor bytes above what was held before the step
};

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Runs the variants inside the benchmark loop and sets counters "<name>_ms" and
// "<name>_peak_MiB" for each.
inline void run_paired(benchmark::State& state, std::vector<PairedVariant>& variants) {
  using Clock = std::chrono::steady_clock;
  for (auto& v : variants) {  // warm-up: scales, caches, thread-local buffers
    v.step();
    const int64_t before = memory_allocated();
    reset_peak_memory_stats();
    v.step();
    v.peak_mib = static_cast<double>(max_memory_allocated() - before) / (1 << 20);
  }
  std::vector<std::vector<double>> times(variants.size());
  size_t rotation = 0;
  for (auto _ : state) {
    for (size_t j = 0; j < variants.size(); ++j) {
      const size_t i = (j + rotation) % variants.size();
      const Clock::time_point t0 = Clock::now();
      variants[i].step();
      times[i].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    ++rotation;
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    variants[i].median_ms = median_of(times[i]);
    state.counters[variants[i].name + "_ms"] = variants[i].median_ms;
    state.counters[variants[i].name + "_peak_MiB"] = variants[i].peak_mib;
  }
}

}  // namespace mantissa::bench
