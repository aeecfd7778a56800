#pragma once
// Writes bf16 rows into oneDNN's tiled B layout (Bf16TiledB, onednn_matmul.h), one k tile (32
// rows of B) at a time, so a producer of B (the 4-bit dequantization) can hand oneDNN its
// operand in the layout it would otherwise repack it into on every call.
#include <cstdint>

#include "kernels/cpu/onednn/onednn_matmul.h"

namespace mantissa::kernels {

// K tile kt of B from `rows` (<= 32) rows of n bf16 values each, row r at src + r * ld (B's rows
// kt * 32 + r): every tile (kt, 0 .. n_tiles) is written whole, rows from `rows` to 32 and
// columns from n to the padded width as zeros. The AVX-512 BW version where the CPU has it.
void pack_bf16_k_tile(const uint16_t* src, int64_t ld, int64_t rows, int64_t n, const Bf16TiledB& t,
                      int64_t kt, uint16_t* b);
void pack_bf16_k_tile_scalar(const uint16_t* src, int64_t ld, int64_t rows, int64_t n,
                             const Bf16TiledB& t, int64_t kt, uint16_t* b);

// N tile nt of B = R^T from `rows` (<= 64) rows of R with k bf16 values each, row r at src + r *
// ld (B's columns nt * 64 + r; element (c, r) of B is R[r][c]): every tile (0 .. k_tiles, nt)
// is written whole, padding as zeros. This is the forward product x W^T's B for a weight W
// stored by rows. The AVX-512 version transposes 16 x 16 blocks of k pairs in registers.
void pack_bf16_n_tile_transposed(const uint16_t* src, int64_t ld, int64_t rows, int64_t k,
                                 const Bf16TiledB& t, int64_t nt, uint16_t* b);
void pack_bf16_n_tile_transposed_scalar(const uint16_t* src, int64_t ld, int64_t rows, int64_t k,
                                        const Bf16TiledB& t, int64_t nt, uint16_t* b);

}  // namespace mantissa::kernels
