#pragma once
// Internal pieces of the AVX2+FMA native GEMM (gemm_native.h, driven by gemm_native_avx2.cpp):
// blocking constants, the packed panel layout, the widening packers and the micro-kernel.
// Every operand dtype (f32, bf16, f16) is packed into fp32 panels: bf16 is widened by a
// 16-bit shift and f16 by F16C while the panel is copied, so low-precision operands cost one
// read of half the bytes instead of a separate conversion pass, and the micro-kernel is the
// same fp32 FMA loop for all of them.
#include <cstdint>

#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::gemm_avx2 {

// Micro-tile: 6 rows x 16 columns (two ymm of fp32) = 12 accumulators, leaving 4 of the 16
// ymm registers for the two B vectors and the A broadcasts. Per k step: 2 B loads and 6
// broadcasts feed 12 FMAs, i.e. 6 cycles of Zen 3's / Haswell's two FMA pipes against 4 of
// its two load ports, so the FMA pipes set the pace.
inline constexpr int kMR = 6;
inline constexpr int kNR = 16;

// Cache blocking (Zen 3: 32 KiB L1d, 512 KiB L2 per core). A KC x 16 B micro-panel (16 KiB)
// stays in L1 while the kernel sweeps the MC x KC block of packed A (<= 96 KiB) from L2.
// K blocks continue the same fp32 accumulators, so they never change results.
inline constexpr int64_t kKc = 256;
inline constexpr int64_t kMcMax = 16 * kMR;
inline constexpr int64_t kNcMax = 16 * kNR;

// Packed panels, fp32, zero padded to full width: A panel [K][kMR], B panel [K][kNR]; the
// K block starting at k0 starts at element k0 * kMR (or k0 * kNR).
// src element (p, k) of the panel, p < count (a row of A or a column of B), is
// src[p * ps + k * ks] in `dtype` (f32, bf16, f16, or the FP8 formats, decoded to their exact
// value).
void pack_a(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K, float* dst);
void pack_b(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K, float* dst);
// The same for a 4-bit B (gemm_lowbit.h): panel element (p, k) is flat element
// first + p * ps + k * ks of `src`.
void pack_b_four_bit(const GemmFourBit& src, int64_t first, int64_t ps, int64_t ks, int count,
                     int64_t K, float* dst);

// Where one micro-kernel call reads and writes its m x n corner of the C tile.
struct Tile {
  float* c = nullptr;     // fp32 partial sums (ldc floats per row): read unless `first`,
  int64_t ldc = 0;        // written unless this is the `last` call and the output is narrow
  void* c_low = nullptr;  // when set, the last call stores the sums rounded (RNE) to
  int64_t ldc_low = 0;    // low_dtype (bf16 or f16) here instead
  DType low_dtype = kFloat32;
  const float* bias = nullptr;  // kNR fp32 values (zero padded) added by the first call
  int m = kMR, n = kNR;
  bool first = true, last = true;
  // GemmLowbit::scale_epilogue: the first call starts from zero, the last multiplies the sums
  // by alpha and then adds the bias.
  bool scale_epilogue = false;
  float alpha = 1.0f;
};

// One K block of one micro-tile: kc k steps over packed panels a (kc x kMR) and b (kc x kNR).
void kernel_f32_avx2(int64_t kc, const float* a, const float* b, const Tile& t);

}  // namespace mantissa::kernels::gemm_avx2

namespace mantissa::kernels {
// gemm_native on the AVX2 path: any of f32, bf16, f16 operands; output f32 or the operands'
// dtype.
void gemm_native_avx2(const GemmArgs& args);
}  // namespace mantissa::kernels
