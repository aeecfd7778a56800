#pragma once
// Internal pieces of the native GEMM (gemm_native.h): blocking constants, packed panel
// layouts, packing routines and the micro-kernels.
#include <cstdint>

namespace mantissa::kernels::gemm {

// Micro-tile: 14 rows x 32 columns (two zmm of fp32) = 28 accumulators, leaving 4 of the 32
// zmm registers for B and broadcasts. Per k step: 2 B loads and 14 broadcasts feed 28 FMAs
// (or VDPBF16PS), so the one-per-cycle FMA pipe, not the load ports, sets the pace.
inline constexpr int kMR = 14;
inline constexpr int kNR = 32;

// Cache blocking. A K block of a 14-row A panel plus a 32-column B panel is 2 KiB of bytes per
// k-row pair; kKcBytes keeps one MC x KC block of packed A (~220 KiB) resident in the 1 MiB L2
// while the B panels of the N block stream past it. K blocks only split long sums into
// passes over the same fp32 accumulators (continued, not restarted), so they never change
// results.
inline constexpr int64_t kKcBytes = 2048;  // per packed row: KC = 512 f32 or 1024 bf16
inline constexpr int64_t kMcMax = 8 * kMR;
inline constexpr int64_t kNcMax = 8 * kNR;

// Packed layouts (zero padded to full panels, K rounded up to even for bf16):
//   A panel f32:  [K][kMR]             A panel bf16: [K/2][kMR][2]
//   B panel f32:  [K][kNR]             B panel bf16: [K/2][kNR][2]  (VNNI pairs)
// so the k-block starting at k0 of a panel starts at element k0 * kMR (or k0 * kNR).
void pack_a_f32(const float* a, int64_t rs, int64_t cs, int rows, int64_t K, float* dst);
void pack_b_f32(const float* b, int64_t rs, int64_t cs, int cols, int64_t K, float* dst);
void pack_a_bf16(const uint16_t* a, int64_t rs, int64_t cs, int rows, int64_t K, uint16_t* dst);
void pack_b_bf16(const uint16_t* b, int64_t rs, int64_t cs, int cols, int64_t K, uint16_t* dst);

// Where a micro-kernel call reads and writes its m x n corner of the C tile.
struct Tile {
  float* c = nullptr;          // fp32 partial sums: read unless `first`, written unless the call is
  int64_t ldc = 0;             // the last and the output is bf16
  uint16_t* c_bf16 = nullptr;  // when set, the last call stores the RNE-rounded sums here
  int64_t ldc_bf16 = 0;
  const float* bias = nullptr;  // the tile's n bias values, added by the first call
  int m = kMR, n = kNR;
  bool first = true, last = true;
};

// One K block of one micro-tile: kc k-steps (an even number for bf16) of packed panels.
void kernel_f32_avx512(int64_t kc, const float* a, const float* b, const Tile& t);
void kernel_bf16_avx512(int64_t kc, const uint16_t* a, const uint16_t* b, const Tile& t);

}  // namespace mantissa::kernels::gemm
