#pragma once
// Internal pieces of the AVX2+FMA float64 GEMM (gemm_f64.h, driven by gemm_native_f64_avx2.cpp):
// blocking constants, the packed panel layout, the packers and the micro-kernel. The same BLIS
// structure as the fp32 AVX2 GEMM (gemm_avx2_impl.h) at half the lanes per register.
#include <cstdint>

namespace mantissa::kernels::gemm_avx2_f64 {

// Micro-tile: 6 rows x 8 columns (two ymm of doubles) = 12 accumulators, leaving 4 of the 16 ymm
// registers for the two B vectors and the A broadcasts. Per k step: 2 B loads and 6 broadcasts
// feed 12 FMAs, 6 cycles of two FMA pipes against 4 of two load ports: the FMAs set the pace.
inline constexpr int kMR = 6;
inline constexpr int kNR = 8;

// Cache blocking (Zen 3: 32 KiB L1d, 512 KiB L2 per core). A KC x 8 B micro-panel (16 KiB) stays
// in L1 while the kernel sweeps the MC x KC block of packed A (<= 144 KiB) from L2; the KC x NC
// block of packed B (<= 512 KiB) is swept once per M block from L2/L3. K blocks continue the same
// accumulators (through C), so they never change results.
inline constexpr int64_t kKc = 256;
inline constexpr int64_t kMcMax = 12 * kMR;
inline constexpr int64_t kNcMax = 32 * kNR;

// Packed panels, zero padded to full width: A panel [k][kMR], B panel [k][kNR]. Panel element
// (p, k), p < count (a row of A or a column of B), is src[p * ps + k * ks].
void pack_a(const double* src, int64_t ps, int64_t ks, int count, int64_t K, double* dst);
void pack_b(const double* src, int64_t ps, int64_t ks, int count, int64_t K, double* dst);

// Where one micro-kernel call reads and writes its m x n corner of the C tile.
struct Tile {
  double* c = nullptr;  // row i at c + i * ldc
  int64_t ldc = 0;
  int m = kMR, n = kNR;
  bool load = false;  // start from C's values (an earlier K block, or accumulate) instead of 0
};

// One K block of one micro-tile: kc k steps over packed panels a (kc x kMR) and b (kc x kNR).
void kernel_f64_avx2(int64_t kc, const double* a, const double* b, const Tile& t);

}  // namespace mantissa::kernels::gemm_avx2_f64
