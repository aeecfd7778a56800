#pragma once
// The bf16 register tile of the products that decode their operands into float panels (the
// block-format product, kernels/cpu/mx/mx_gemm.cpp, and the FP8 block-scaled product,
// kernels/cpu/fp8/fp8_block_gemm.cpp): the fp32 register tile's operations
// (fp32_register_tile.h: one fma per k in k order, the promoting form included) on VDPBF16PS,
// which does two k steps per instruction at twice the fp32 FMA rate on AMD's Zen 4.
//
// VDPBF16PS lane i computes fma(a[2i], b[2i], fma(a[2i + 1], b[2i + 1], acc[i])), each step
// rounded once, with bf16 subnormal inputs read as zero and subnormal results flushed. The
// panels hold each pair of k steps swapped, k in the odd slot and k + 1 in the even one, so one
// instruction does fma(k) then fma(k + 1): the fp32 tile's bits wherever
//  - every panel value is a bf16 normal number or zero (pack_* check it),
//  - no partial sum is subnormal, infinite or NaN (the caller's guard: values multiples of 2^la
//    and 2^lb with la + lb >= -126 and sums bounded below 2^127),
//  - the CPU's VDPBF16PS orders its steps so (bf16_pair_dot_matches_fma, a probe run once).
// An odd K is padded with a last pair (a[K - 1], -0) x (b[K - 1], +0): its second step adds
// -0 * +0 = -0, which leaves every accumulator as it is (+0 + -0 is +0, -0 + -0 is -0).
#include <cstdint>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {

// a: rows of pairs (row r's pair p at a[r * lda + p]); b: pairs of k rows of cols columns
// (pair p of column c at b[p * ldb + c]); kp pairs. Otherwise as Fp32TileFn / Fp32PromoteFn.
using Bf16PairTileFn = void (*)(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                                int64_t kp, float* acc, int64_t ldc, bool zero);
using Bf16PairPromoteFn = void (*)(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                                   int64_t kp, const float* sa, const float* sb, float* out,
                                   int64_t ldo, bool first);

struct Bf16PairTile {
  int rows, cols;  // 8 x 32: the AVX-512 fp32 tile's shape, so both read the same float panels
  Bf16PairTileFn fn;
  Bf16PairPromoteFn promote;
};

// The tile where `level` (clamped to this CPU's) has AVX-512 BF16 and the probe passed; else
// null (the caller runs the fp32 tile).
const Bf16PairTile* bf16_pair_tile(SimdLevel level);

// Whether this CPU's VDPBF16PS gives the bits of the two-fma chain above on crafted cases
// (cancellation, ties, mixed magnitudes, signed zeros, the padding pair) and random ones.
// Computed once; false where the CPU lacks AVX-512 BF16.
bool bf16_pair_dot_matches_fma();

// Pairs of row r's k steps: dst[r * ldd + p] = (bf16(src[r * lds + 2p]) << 16) |
// bf16(src[r * lds + 2p + 1]) for p < ceil(kl / 2), the odd kl's last pair padded with -0.
// False (dst partly written) where a value is not a bf16 normal number or zero.
bool pack_pair_rows(const float* src, int64_t lds, int64_t rows, int64_t kl, uint32_t* dst,
                    int64_t ldd);
// A strip of kl k-major rows of `cols` columns (a multiple of 16): dst[p * cols + c] =
// (bf16(src[2p * cols + c]) << 16) | bf16(src[(2p + 1) * cols + c]), the odd kl's last pair
// padded with +0. False as above where a value of the first `valid` columns is not (the columns
// past them are packed unchecked: a panel's columns past its end, whose results are dropped).
bool pack_pair_strip(const float* src, int64_t cols, int64_t valid, int64_t kl, uint32_t* dst);

// The calling thread's buffer `slot` (< kPairPanelSlots) of at least `words` words for packed
// panels, kept from call to call: fresh panels each product page-fault, and grow the heap past
// glibc's trim threshold, whose trims then make every call's panels fault again.
inline constexpr int kPairPanelSlots = 3;
uint32_t* pair_panel_buffer(int slot, int64_t words);

}  // namespace mantissa::kernels
