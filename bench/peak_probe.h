#pragma once
// The machine's arithmetic peak, measured while the benchmark runs: every OpenMP thread runs a
// loop of 24 independent register-only vfmadd231ps zmm (fp32) or vdpbf16ps zmm (bf16)
// instructions, enough to cover their latency times throughput on current x86 cores (Zen 4
// double-pumps 512-bit ops: one zmm FMA per cycle per core). The clock of a shared machine
// drifts with its neighbours' load, so benchmarks call a short burst next to each measured
// product and divide by the peak of the same moment, not by a constant.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>

#include "mantissa/core/cpu_features.h"

namespace mantissa::bench {

#define MANTISSA_PROBE_X24(insn)                                                                \
  insn(0) insn(1) insn(2) insn(3) insn(4) insn(5) insn(6) insn(7) insn(8) insn(9) insn(10)      \
      insn(11) insn(12) insn(13) insn(14) insn(15) insn(16) insn(17) insn(18) insn(19) insn(20) \
          insn(21) insn(22) insn(23)
#define MANTISSA_PROBE_ZERO(i) "vpxord %%zmm" #i ", %%zmm" #i ", %%zmm" #i "\n\t"
#define MANTISSA_PROBE_FMA(i) "vfmadd231ps %%zmm24, %%zmm25, %%zmm" #i "\n\t"
#define MANTISSA_PROBE_DPBF16(i) "vdpbf16ps %%zmm24, %%zmm25, %%zmm" #i "\n\t"
// Zero operands: no denormals or overflow whatever the iteration count.
#define MANTISSA_PROBE_LOOP(body) \
  asm volatile(MANTISSA_PROBE_X24(MANTISSA_PROBE_ZERO) MANTISSA_PROBE_ZERO(24)               \
                   MANTISSA_PROBE_ZERO(25) "1:\n\t" MANTISSA_PROBE_X24(body) "dec %0\n\t"    \
                                                                             "jnz 1b\n\t"    \
               : "+r"(iters)                                                                 \
               :                                                                             \
               : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",     \
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",      \
                 "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",     \
                 "xmm25", "cc")

// Flops per loop iteration: 24 instructions x 16 lanes x (2 flops per FMA, 4 per pair dot).
inline constexpr double kProbeFlopsF32 = 24.0 * 16 * 2;
inline constexpr double kProbeFlopsBf16 = 24.0 * 16 * 4;

__attribute__((target("avx512f"), noinline)) inline void probe_fma_f32(int64_t iters) {
  MANTISSA_PROBE_LOOP(MANTISSA_PROBE_FMA);
}
__attribute__((target("avx512f,avx512bf16"), noinline)) inline void probe_dpbf16(int64_t iters) {
  MANTISSA_PROBE_LOOP(MANTISSA_PROBE_DPBF16);
}

// AVX2 machines (no AVX-512): 12 independent vfmadd231ps ymm, two per cycle on Zen 3 and
// Intel client cores with a 4-5 cycle latency, into ymm0..11 from ymm12/13.
#define MANTISSA_PROBE_X12(insn) \
  insn(0) insn(1) insn(2) insn(3) insn(4) insn(5) insn(6) insn(7) insn(8) insn(9) insn(10) insn(11)
#define MANTISSA_PROBE_ZERO_Y(i) "vxorps %%ymm" #i ", %%ymm" #i ", %%ymm" #i "\n\t"
#define MANTISSA_PROBE_FMA_Y(i) "vfmadd231ps %%ymm12, %%ymm13, %%ymm" #i "\n\t"
inline constexpr double kProbeFlopsF32Avx2 = 12.0 * 8 * 2;

__attribute__((target("avx2,fma"), noinline)) inline void probe_fma_f32_avx2(int64_t iters) {
  asm volatile(MANTISSA_PROBE_X12(MANTISSA_PROBE_ZERO_Y) MANTISSA_PROBE_ZERO_Y(12)
                   MANTISSA_PROBE_ZERO_Y(13) "1:\n\t" MANTISSA_PROBE_X12(MANTISSA_PROBE_FMA_Y)
                       "dec %0\n\t"
                       "jnz 1b\n\t"
               : "+r"(iters)
               :
               : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                 "xmm10", "xmm11", "xmm12", "xmm13", "cc");
}

// CPU seconds used by all threads of this process so far.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct PeakSample {
  double gflops;          // all threads, over the wall time of the burst
  double gflops_per_cpu;  // per CPU second the burst ran: unaffected by time spent preempted
};

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// All OpenMP threads running `iters` iterations of the probe at once, or nullopt when the CPU
// lacks the instruction. 100k iterations take about 1 ms at 3 GHz (0.2 ms with AVX2's ymm).
// Each thread times its own burst from a barrier and the rates are summed: timing the whole
// parallel region instead counted the wake-up of sleeping threads (OMP_WAIT_POLICY=passive,
// as the benchmarks recommend), which on a 2-core Zen 3 read half the true AVX2 peak.
inline std::optional<PeakSample> measure_peak(bool bf16, int64_t iters = 100000) {
  const CpuFeatures& f = cpu_features();
  if (bf16 && !(f.avx512f && f.avx512_bf16)) return std::nullopt;
  // Without AVX-512F (or with it disabled by MANTISSA_DISABLE_SIMD) the fp32 peak is AVX2's.
  const bool avx2 = !f.avx512f;
  if (avx2 && !(f.avx2 && f.fma)) return std::nullopt;
  const double flops = (bf16   ? kProbeFlopsBf16
                        : avx2 ? kProbeFlopsF32Avx2
                               : kProbeFlopsF32) *
                       static_cast<double>(iters);
  double rate = 0, cpu_seconds = 0;
  int threads = 0;
#pragma omp parallel reduction(+ : rate, cpu_seconds, threads)
  {
#pragma omp barrier
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    if (bf16) {
      probe_dpbf16(iters);
    } else if (avx2) {
      probe_fma_f32_avx2(iters);
    } else {
      probe_fma_f32(iters);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate += flops / s * 1e-9;
    cpu_seconds += std::max(thread_cpu_seconds() - c0, 1e-9);
    threads += 1;
  }
  return PeakSample{rate, flops * threads / cpu_seconds * 1e-9};
}

#undef MANTISSA_PROBE_LOOP
#undef MANTISSA_PROBE_DPBF16
#undef MANTISSA_PROBE_FMA
#undef MANTISSA_PROBE_ZERO
#undef MANTISSA_PROBE_X24
#undef MANTISSA_PROBE_X12
#undef MANTISSA_PROBE_ZERO_Y
#undef MANTISSA_PROBE_FMA_Y

}  // namespace mantissa::bench
