#pragma once
// Shared by the Google Benchmark programs: the machine's peaks (overridable from the
// environment) and wall-clock counters. Each benchmark times its own loop so the counters are
// plain numbers: Google Benchmark's rate counters would print "/s" after a fraction.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <omp.h>
#include <xmmintrin.h>

namespace mantissa::bench {

// Nominal peaks of the development machine (2 cores of AMD Zen 4 / EPYC Genoa, which
// double-pumps 512-bit ops; measured with peak_probe.h at ~3.2 GHz): fp32 FMA ~200 GFLOP/s,
// bf16 dot products (VDPBF16PS) ~410 GFLOP/s. bench_matmul measures the
// arithmetic peaks while it runs and the bandwidth programs measure memory
// (measured_mem_gbps); the variables below override either.
inline constexpr double kPeakF32Gflops = 200.0;
inline constexpr double kPeakBF16Gflops = 410.0;

// The value of environment variable `name` when it is a positive number, else `fallback`.
inline double peak_from_env(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return (end != v && d > 0) ? d : fallback;
}

using Clock = std::chrono::steady_clock;

// This machine's memory bandwidth: the best of four passes over 64 MiB arrays (far beyond a
// 32 MiB L3), each split over the OpenMP threads, best of 9 after a first touch, counting the
// bytes read and written:
//   copy    memcpy of each thread's share (STREAM's "copy");
//   scale   b = s * a, vectorised (STREAM's "scale");
//   stream  a copy with non-temporal 16-byte stores;
//   update  a = s * a in place.
// Copy and scale write through the cache, so each written line is first read (read for
// ownership) and that read is not counted: on a Zen 3 they alone read 23-27 GB/s while
// conversion passes moved 30-37 GB/s of counted bytes, and every of_mem_bw read above 1. The
// streaming and in-place passes carry no uncounted traffic (the in-place one moves what the
// unscale + inf check does); on that Zen 3 the in-place pass reads 33-37 GB/s and a read-only
// sum only 18 (two cores cannot keep enough reads in flight alone). A conversion writing
// through the cache can reach about 0.75-0.85 of this figure (its own destination reads are
// not counted either); one with streaming stores, or in place, all of it.
inline double measured_mem_gbps() {
  static const double gbps = [] {
    const int64_t n = int64_t{16} << 20;  // floats: 64 MiB per array
    std::vector<float> a(static_cast<size_t>(n), 1.0f), b(static_cast<size_t>(n), 0.0f);
    const double bytes = 2.0 * 4.0 * static_cast<double>(n);
    auto share = [n](int64_t& begin, int64_t& end) {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t chunk = (n + threads - 1) / threads / 4 * 4;  // whole SSE vectors
      begin = std::min(n, t * chunk);
      end = t == threads - 1 ? n : std::min(n, begin + chunk);
    };
    double best = 0;
    for (int pass = 0; pass < 10; ++pass) {
      Clock::time_point t0 = Clock::now();
#pragma omp parallel
      {
        int64_t begin, end;
        share(begin, end);
        std::memcpy(b.data() + begin, a.data() + begin, static_cast<size_t>(end - begin) * 4);
      }
      const double copy_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) b[i] = 1.0001f * a[i];
      const double scale_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
#pragma omp parallel
      {
        int64_t begin, end;
        share(begin, end);
        int64_t i = begin;
        // std::vector's storage is 16-byte aligned, and every share starts on a whole vector.
        for (; i + 4 <= end; i += 4) _mm_stream_ps(b.data() + i, _mm_loadu_ps(a.data() + i));
        for (; i < end; ++i) b[static_cast<size_t>(i)] = a[static_cast<size_t>(i)];
        _mm_sfence();
      }
      const double stream_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) a[i] = 1.0001f * a[i];
      const double update_s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (pass > 0)
        best = std::max({best, bytes / copy_s * 1e-9, bytes / scale_s * 1e-9,
                         bytes / stream_s * 1e-9, bytes / update_s * 1e-9});
    }
    return best;
  }();
  return gbps;
}

// The bandwidth that `of_mem_bw` divides by: MANTISSA_PEAK_MEM_GBPS when set, else the
// measured one. 1M elements fit in L3, so their fraction can exceed 1.
inline double peak_mem_gbps() {
  static const double peak = peak_from_env("MANTISSA_PEAK_MEM_GBPS", measured_mem_gbps());
  return peak;
}

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
