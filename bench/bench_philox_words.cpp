// How fast this CPU makes the stochastic casts' random words: Philox4x32-10 (src/kernels/cpu/mx/
// philox.h) alone, in registers and in cache, as the casts call it (16 counter blocks of a row at
// a time: philox_avx2.h's philox16 on 8 lanes, philox_avx512.h's on 16, and the Hadamard columns'
// 8 rows on 8 lanes), and the scalar generator. Every element of a stochastic NVFP4 or MXFP4-SR
// cast draws 8 bits (philox.h's sr_byte), a word serving four elements, so four times the words
// per ns is the most elements per ns such a cast can reach; set against bench_cast_memory_speed's
// memcpy it bounds the stochastic rows' ratio.
//
// The core clock is estimated by a chain of dependent adds (one a cycle), so that the words'
// cost is also given in cycles. Times are the process's CPU time (the best of 5 runs), which
// neighbours on a shared machine do not inflate.
//
//   build/bench_philox_words [CALLS]        (CALLS of 64 words each, default 2000000)
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cpu/mx/philox.h"
#include "kernels/cpu/mx/philox_avx2.h"
#include "kernels/cpu/mx/philox_avx512.h"
#include "mantissa/core/cpu_features.h"

namespace {

using namespace mantissa;
using namespace mantissa::kernels::mx;

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Each run folds every word into one, so that none is dropped; counters walk a row's 64-column
// groups and then the rows, as a cast's do.
__attribute__((target("avx2,fma,f16c"), noinline)) uint32_t avx2_row_blocks(uint64_t seed,
                                                                            int64_t calls) {
  const philox_avx2::PhiloxKeys8 keys(seed);
  __m256i acc = _mm256_setzero_si256();
  for (int64_t i = 0; i < calls; ++i) {
    __m256i out[2][4];
    philox_avx2::philox16(keys, 7, static_cast<uint64_t>(i >> 6),
                          16 * static_cast<uint64_t>(i & 63), out);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) acc = _mm256_xor_si256(acc, out[h][k]);
  }
  return static_cast<uint32_t>(_mm256_extract_epi32(acc, 0) ^ _mm256_extract_epi32(acc, 7));
}

__attribute__((target("avx2,fma,f16c"), noinline)) uint32_t avx2_column_rows(uint64_t seed,
                                                                             int64_t calls) {
  const philox_avx2::PhiloxKeys8 keys(seed);
  __m256i acc = _mm256_setzero_si256();
  const __m256i rows = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < calls; ++i) {
    // Two calls of 32 words: 64 words, as the other runs' calls.
    for (int j = 0; j < 2; ++j) {
      __m256i out[4];
      philox_avx2::philox8_lanes_in_word1(keys, static_cast<uint32_t>(2 * i + j), rows, 7, 0, out);
      for (int k = 0; k < 4; ++k) acc = _mm256_xor_si256(acc, out[k]);
    }
  }
  return static_cast<uint32_t>(_mm256_extract_epi32(acc, 0) ^ _mm256_extract_epi32(acc, 7));
}

__attribute__((target("avx512f,avx512bw,avx512vl"), noinline)) uint32_t avx512_row_blocks(
    uint64_t seed, int64_t calls) {
  const philox_avx512::PhiloxKeys16 keys(seed);
  __m512i acc = _mm512_setzero_si512();
  for (int64_t i = 0; i < calls; ++i) {
    __m512i out[4];
    philox_avx512::philox16(keys, 7, static_cast<uint64_t>(i >> 6),
                            16 * static_cast<uint64_t>(i & 63), out);
    for (int k = 0; k < 4; ++k) acc = _mm512_xor_si512(acc, out[k]);
  }
  return static_cast<uint32_t>(_mm512_reduce_add_epi32(acc));
}

__attribute__((noinline)) uint32_t scalar_row_blocks(uint64_t seed, int64_t calls) {
  uint32_t acc = 0;
  for (int64_t i = 0; i < calls; ++i)
    for (int l = 0; l < 16; ++l) {
      const PhiloxCounter w = philox4x32_10(
          sr_counter(16 * static_cast<uint64_t>(i & 63) + l, static_cast<uint64_t>(i >> 6), 7),
          sr_key(seed));
      acc ^= w[0] ^ w[1] ^ w[2] ^ w[3];
    }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t calls = argc > 1 ? std::max<int64_t>(1000, std::atoll(argv[1])) : 2000000;
  const uint64_t seed = 0x243F6A8885A308D3ull;
  // The clock: 4e8 dependent adds, one a cycle.
  double ghz = 0;
  {
    int64_t x = 0;
    const double t0 = cpu_seconds();
    for (int64_t i = 0; i < 400000000; ++i) asm volatile("add $1, %0" : "+r"(x));
    ghz = 0.4 / (cpu_seconds() - t0);
  }
  std::printf("core clock ~%.2f GHz (dependent adds), %lld calls of 64 words, CPU time\n", ghz,
              static_cast<long long>(calls));
  std::printf("%-44s %9s %9s %12s\n", "generator", "ns/word", "words/ns", "cycles/word");
  uint32_t sink = 0;
  auto report = [&](const char* name, int64_t n, uint32_t (*run)(uint64_t, int64_t)) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = cpu_seconds();
      sink ^= run(seed, n);
      best = std::min(best, cpu_seconds() - t0);
    }
    const double ns = best * 1e9 / (64.0 * static_cast<double>(n));
    std::printf("%-44s %9.3f %9.2f %12.2f\n", name, ns, 1.0 / ns, ns * ghz);
  };
  report("scalar philox4x32_10", calls / 8, scalar_row_blocks);
  if (cpu_features().avx2) {
    report("AVX2, 16 blocks of a row (philox16)", calls, avx2_row_blocks);
    report("AVX2, 8 rows of a block (lanes_in_word1)", calls, avx2_column_rows);
  }
  if (simd_level() >= SimdLevel::kAvx512)
    report("AVX-512, 16 blocks of a row (philox16)", calls, avx512_row_blocks);
  return sink == 0x5EED ? 1 : 0;  // keeps the words; any value is fine
}
