#pragma once
// What the AVX2 row casts of each element type (mx_rows_fp8_avx2.cpp, mx_rows_e2m1_avx2.cpp)
// share: the records of a group of eight blocks (record_group, finish_peak), the fetch of a
// source's group ahead (fetch_group_ahead), and a row segment cast as whole groups by the
// element's body and the rest block by block (encode_rows), with its statistics
// (encode_rows_of); the AVX-512 row bodies take its records too. A file includes it
// last, after mx_blocks_avx2.h, and common/fetch_ahead.h before its ISA pragma.

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The records (best, scale, peak) of eight blocks in order, none of whose amax is NaN: peak as
// the largest amax * multiplier (exact in float32: a power of 2, or 1 below the smallest scale)
// kept in lanes until the segment ends; best and scale where a block raises best (rarely past a
// segment's first blocks).
inline void record_group(MxStatsRun& run, __m256i amax, const float* mul, __m256& peak) {
  peak = _mm256_max_ps(peak, _mm256_mul_ps(_mm256_castsi256_ps(amax), _mm256_load_ps(mul)));
  // best's bits order non-negative floats as int32 do; -1 (no block) lies below them all.
  const __m256i best = _mm256_set1_epi32(static_cast<int32_t>(bits_of(run.best)));
  if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(amax, best))) == 0) return;
  alignas(32) float a[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), amax);
  for (int b = 0; b < 8; ++b) {
    if (a[b] > run.best) {
      run.best = a[b];
      run.scaled_best = a[b];
      run.scale = mul[b];
    }
  }
}

// The source's group at element i fetched ahead. A bfloat16 group's 8 lines 4 KiB ahead into L1
// (common/fetch_ahead.h's fetch_group_lines_ahead): into L2 8 KiB ahead, its FP8 rows ran at
// 0.8-0.85 times the speed. A float32 group's 16 lines where its codes are streamed (kStream: the
// cast outgrows the caches) 8 KiB ahead into L2 (fetch_group_lines_to_l2): out of the caches at
// one thread its preparation waited on memory; with the fetch the float32 rows' ratio to memcpy
// rose 0.70-0.78 -> 0.80-0.83 (AVX2 0.71-0.77 -> 0.74-0.80; 16 KiB ahead no better;
// bench/results/2026-12-01-0245-mxfetch10.md). In the caches (codes not streamed) a float32 group
// takes no fetch.
template <DType::Id kSrc, bool kStream>
[[gnu::always_inline]] inline void fetch_group_ahead(const void* src, int64_t i) {
  if constexpr (kSrc == DType::Id::bf16)
    kernels::fetch_group_lines_ahead(static_cast<const uint16_t*>(src) + i);
  else if constexpr (kStream)
    kernels::fetch_group_lines_to_l2<16, 8192>(static_cast<const float*>(src) + i);
}

// The largest lane of peak (non-negative, no NaN) into run.peak as record_block takes it.
inline void finish_peak(MxStatsRun& run, __m256 peak, float elem_max) {
  run.peak = std::max(run.peak, static_cast<double>(hmax(peak)) / elem_max);
}

// A row cast: whole groups of eight blocks (Groups<E, R, kSrc, kStream>::run, the element's
// body; it returns the elements done), the rest block by block. `stream` (a cast whose codes
// outgrow the caches): a float32 source's codes are streamed past the caches where they lie on
// 32-byte boundaries. A bfloat16 source's are not: reading 2 bytes for each code byte (or half
// byte), its casts measured slower streamed than written back from the caches
// (bench/results/2026-11-30-1150-mx-rows-round4.md), where float32's gained.
template <Element E, E8m0Rounding R, DType::Id kSrc,
          template <Element, E8m0Rounding, DType::Id, bool> class Groups>
void encode_rows(const void* src, int64_t n, uint8_t* codes, uint8_t* scales, SegmentStats* st,
                 bool stream) {
  int64_t done;
  if constexpr (kSrc == DType::Id::f32)
    done = stream && reinterpret_cast<uintptr_t>(codes) % 32 == 0
               ? Groups<E, R, kSrc, true>::run(src, n, codes, scales, st)
               : Groups<E, R, kSrc, false>::run(src, n, codes, scales, st);
  else
    done = Groups<E, R, kSrc, false>::run(src, n, codes, scales, st);
  if (done == n) return;
  const void* rest = at(src, DType{kSrc}, done);
  if constexpr (kSrc == DType::Id::bf16 && E != Element::kE2m1)
    mx_encode_bf16<E, R>(static_cast<const uint16_t*>(rest), n - done, codes + done,
                         scales + done / kMxBlock, st);
  else
    mx_encode_as<E, R, kSrc>(rest, n - done, codes + code_bytes(E, done), scales + done / kMxBlock,
                             st);
}

// encode_rows of a segment in element E under rounding r from a dtype source, with its
// statistics (`stats`; else an empty run).
template <template <Element, E8m0Rounding, DType::Id, bool> class Groups, Element E>
MxStatsRun encode_rows_of(const void* src, DType dtype, int64_t n, E8m0Rounding r, uint8_t* codes,
                          uint8_t* scales, bool stats, bool stream) {
  SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
  SegmentStats* s = stats ? &st : nullptr;
  const bool f32 = dtype == kFloat32;
  if (r == E8m0Rounding::kFloor) {
    constexpr E8m0Rounding R = E8m0Rounding::kFloor;
    f32 ? encode_rows<E, R, DType::Id::f32, Groups>(src, n, codes, scales, s, stream)
        : encode_rows<E, R, DType::Id::bf16, Groups>(src, n, codes, scales, s, stream);
  } else {
    constexpr E8m0Rounding R = E8m0Rounding::kRceil;
    f32 ? encode_rows<E, R, DType::Id::f32, Groups>(src, n, codes, scales, s, stream)
        : encode_rows<E, R, DType::Id::bf16, Groups>(src, n, codes, scales, s, stream);
  }
  if (!stats) return {};
  st.run.saturated += lane_sum(st.saturated);
  st.run.flushed += lane_sum(st.flushed);
  return st.run;
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
