#pragma once
// The element update of the 8-bit Adam optimizers (include/mantissa/optim/adam8bit.h), after
// bitsandbytes' blockwise kernel (docs/optimizers.md, "The 8-bit update"), for one block of up
// to 256 fp32 parameters in one fused pass: dequantise both moments, update them and the
// parameter, requantise with the block's new absmax. A scalar and an AVX2 version give the same
// bits (no FMA contraction, IEEE division and square root in both).
//
// Per element, with fp32 arithmetic in exactly this order:
//   m = (code1[q1] * absmax1) * beta1 + (1 - beta1) * g
//   v = (code2[q2] * absmax2) * beta2 + ((1 - beta2) * g) * g
//   p = p + step_size * (m / (sqrt(v) + eps_scaled));  then p = p * decay when decaying
// then absmax1 = max |m|, absmax2 = max |v| over the block, q1 = nearest(code1, m * (1 /
// absmax1)) moved one entry toward m's sign when the entry's sign bit differs from m's, q2 =
// nearest(code2, v * (1 / absmax2)); a block whose new absmax is 0 stores the index of 0 (127
// signed, 0 unsigned). Scaling by the reciprocal, as bitsandbytes' quantize_blockwise does, keeps
// the divisions to one per element.
#include <cstdint>

#include "kernels/cpu/optim/dynamic_map_codec.h"
#include "kernels/cpu/quant/code_index_table.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::optim {

inline constexpr int64_t kAdam8bitBlockSize = 256;

// The per-step scalars, computed in double and rounded once to float.
struct Adam8bitScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;   // -lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float eps_scaled;  // eps * sqrt(1 - beta2^t)
  float decay;       // 1 - lr * weight_decay
  bool apply_decay;  // weight_decay > 0
};

// A 256-entry float table split into its four bytes: plane k holds byte k (little end first) of
// every entry, so that byte permutes (VPERMT2B, AVX-512 VBMI) look up 64 codes at a time.
struct CodeBytePlanes {
  alignas(64) uint8_t plane[4][256];
  void build(const float* code);
};

// The same table split into its two 16-bit halves: lo[i] and hi[i] are the low and high words
// of entry i, so that word permutes (VPERMT2W, AVX-512 BW) look up 32 codes at a time on CPUs
// without VBMI.
struct CodeWordPlanes {
  alignas(64) uint16_t lo[256];
  alignas(64) uint16_t hi[256];
  void build(const float* code);
};

// The two maps (signed for m, unsigned for v) with their exact index tables.
struct Adam8bitMaps {
  const float* code1;
  const float* code2;
  const quant::CodeIndexTable* index1;
  const quant::CodeIndexTable* index2;
  uint8_t zero_index1;  // index of 0.0 in code1 (127 for the signed dynamic map)
  uint8_t zero_index2;  // index of 0.0 in code2 (0 for the unsigned one)
  // code1[q] has its sign bit set exactly when q < nonnegative_from1 (127: the signed map's
  // negative entries come first and its 0 is +0).
  int nonnegative_from1;
  // Register-arithmetic codecs of the two maps (dynamic_map_codec.h); the AVX2 kernel needs
  // both exact.
  const DynamicMapCodec* codec1;
  const DynamicMapCodec* codec2;
  // The maps as byte planes, for the table decode on AVX-512 VBMI CPUs.
  const CodeBytePlanes* planes1;
  const CodeBytePlanes* planes2;
  // The maps as word planes, for the table decode on AVX-512 CPUs without VBMI.
  const CodeWordPlanes* words1;
  const CodeWordPlanes* words2;
};

// Block b's kernels read the block after next into L2 first (p, g, both codes): a block's update
// is long enough (~350 ns) that the hardware prefetcher alone leaves the next one waiting on
// memory (measured: the 8-bit step 1.5x faster with it on a Xeon with AVX-512).
// always_inline: GCC 12 otherwise keeps no prefetch when inlining into the SIMD kernels.
__attribute__((always_inline)) inline void prefetch_block_after_next(int64_t b, int64_t blocks,
                                                                     int64_t off, const float* p,
                                                                     const float* g,
                                                                     const uint8_t* q1,
                                                                     const uint8_t* q2) {
  if (b + 2 >= blocks) return;
  const int64_t ahead = off + 2 * kAdam8bitBlockSize;
  for (int64_t k = 0; k < kAdam8bitBlockSize; k += 16) {
    __builtin_prefetch(p + ahead + k, 1, 2);
    __builtin_prefetch(g + ahead + k, 0, 2);
  }
  for (int64_t k = 0; k < kAdam8bitBlockSize; k += 64) {
    __builtin_prefetch(q1 + ahead + k, 0, 2);
    __builtin_prefetch(q2 + ahead + k, 0, 2);
  }
}

// The built-in maps (bitsandbytes' signed and unsigned dynamic maps).
const Adam8bitMaps& dynamic_adam8bit_maps();

// One block: p and g have n <= 256 elements; q1, q2 their codes; absmax1/absmax2 the block's
// absmax, read and then overwritten.
using Adam8bitBlockFn = void (*)(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                 const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                 float* absmax2, int64_t n);
// The same update with fp32 moments m, v (parameters that keep 32-bit state), any length.
using Adam32SpanFn = void (*)(const Adam8bitScalars& s, float* p, const float* g, float* m,
                              float* v, int64_t n);

// Elements [from, n) of one block in scalar arithmetic, in the order above: the moments into
// m[i], v[i] (the block's scratch), p[i] updated, *new_a1 / *new_a2 raised to cover |m|, |v|.
// The scalar kernel runs it over whole blocks, the SIMD kernels over their tails; it lives in
// the baseline file, so no FMA contraction can change its bits.
void adam8bit_update_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, const uint8_t* q1, const uint8_t* q2, float a1,
                            float a2, float* m, float* v, int64_t from, int64_t n, float* new_a1,
                            float* new_a2);

void adam8bit_block_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                           const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                           int64_t n);
void adam8bit_block_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                         const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                         int64_t n);
// Consecutive blocks: n elements from a block's start, absmax1/absmax2 one per block (the last
// block may be partial). The AVX2 version overlaps one block's update with the previous
// block's encoding.
using Adam8bitBlocksFn = void (*)(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                  const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                  float* absmax2, int64_t n);
void adam8bit_blocks_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                            float* absmax2, int64_t n);
void adam8bit_blocks_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                          const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                          int64_t n);
// The AVX-512 (F, BW, VL, DQ) versions: the AVX2 encoder arithmetic on sixteen lanes, each
// block's codes decoded by word-plane table lookups (CodeWordPlanes), the same bits.
void adam8bit_block_avx512(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                           const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                           int64_t n);
void adam8bit_blocks_avx512(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                            float* absmax2, int64_t n);
// Where the CPU also has VBMI: the same kernels with each block's codes decoded by byte-plane
// table lookups (CodeBytePlanes: 22 instructions for 64 codes instead of about 20 per 16 lanes of
// register arithmetic). The same bits.
void adam8bit_block_avx512_vbmi(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                float* absmax2, int64_t n);
void adam8bit_blocks_avx512_vbmi(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                 const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                 float* absmax2, int64_t n);
void adam32_span_scalar(const Adam8bitScalars& s, float* p, const float* g, float* m, float* v,
                        int64_t n);
void adam32_span_avx2(const Adam8bitScalars& s, float* p, const float* g, float* m, float* v,
                      int64_t n);

// The codes of one moment on their own, as the block kernels encode and decode them (for tests
// and benchmarks): codes[i] = the index for values[i] * inv (inv = 1 / absmax > 0), with the
// sign fix for the first moment; out[i] = code[codes[i]] (AVX-512 by word-plane lookups,
// AVX-512 VBMI by byte-plane ones; the AVX2 kernel decodes by scalar table reads that overlap
// its vector work).
void adam8bit_encode_scalar(const Adam8bitMaps& maps, bool first_moment, const float* values,
                            float inv, uint8_t* codes, int64_t n);
void adam8bit_encode_avx2(const Adam8bitMaps& maps, bool first_moment, const float* values,
                          float inv, uint8_t* codes, int64_t n);
void adam8bit_encode_avx512(const Adam8bitMaps& maps, bool first_moment, const float* values,
                            float inv, uint8_t* codes, int64_t n);
void adam8bit_decode_avx512(const Adam8bitMaps& maps, bool first_moment, const uint8_t* codes,
                            float* out, int64_t n);
void adam8bit_decode_avx512_vbmi(const Adam8bitMaps& maps, bool first_moment, const uint8_t* codes,
                                 float* out, int64_t n);

// Whether g[0..n) holds a NaN or an infinity (the 8-bit step refuses such gradients before it
// changes anything, so this is a pass of its own; AVX2 keeps it at memory speed).
bool any_non_finite_scalar(const float* g, int64_t n);
bool any_non_finite_avx2(const float* g, int64_t n);
bool any_non_finite_avx512(const float* g, int64_t n);
using AnyNonFiniteFn = bool (*)(const float* g, int64_t n);
AnyNonFiniteFn any_non_finite_kernel(SimdLevel level);

// The kernels of one level (scalar for kScalar, AVX2 at avx2, AVX-512 blocks at avx512 and
// above, their VBMI table decode where cpu_features() reports VBMI); the SIMD block kernels need
// exact index tables and codecs, else they run the scalar one.
Adam8bitBlockFn adam8bit_block_kernel(SimdLevel level);
Adam8bitBlocksFn adam8bit_blocks_kernel(SimdLevel level);
Adam32SpanFn adam32_span_kernel(SimdLevel level);

}  // namespace mantissa::kernels::optim
