#pragma once
// The 4-bit Linear's forward product on AMX tiles, the weight decoded 16 rows at a time into a
// buffer that stays in L1 and multiplied from there: no dequantized copy of the weight in memory
// and no repacking of it (docs/quantization.md, "4-bit products on AMX").
//
// The product is computed transposed, y^T = W x^T: a row of W is then a row of an AMX A tile, so
// the decoded rows are multiplied as they are, and only x (small: this path is for few input
// rows) is rearranged, once per call, into the tiles' k-pair layout. Sums are fp32 in the tiles;
// the result is rounded once to bf16 (round to nearest even), after adding the bias.
#include <cstdint>

#include "kernels/cpu/quant/four_bit_tables.h"

namespace mantissa::kernels::quant {

// A 4-bit matrix of rows x cols in bitsandbytes' layout (four_bit.h): flat row-major elements in
// blocks of `blocksize`, with one float32 absmax per block (double quantization resolved).
struct FourBitMatrix {
  const uint8_t* packed = nullptr;
  const float* absmax = nullptr;
  int64_t rows = 0, cols = 0, blocksize = 0;
  FourBitType type = FourBitType::kNf4;
};

// Input rows up to which the 4-bit Linear's forward takes this kernel. It reads all of x^T once
// per group of W's rows, cheap while x is small. bench_linear4bit on the AMX Xeon, NF4 / bf16
// speed: at 64 rows 0.70 -> 0.76-0.78 with it; at 256 rows it was slower than dequantizing for
// oneDNN (1024 x 1024: 0.78 against 0.87).
inline constexpr int64_t kFourBitAmxMaxRows = 128;

// Whether this process can run AMX bf16 tiles: the CPU has them (and MANTISSA_DISABLE_SIMD leaves
// them on), and Linux granted the tile state (asked once, with arch_prctl).
bool amx_bf16_usable();

// y (m x w.rows, bf16) = x (m x w.cols, bf16, contiguous) @ W^T + bias (w.rows bf16 values, or
// null). Requires amx_bf16_usable(). Threads over 16-row panels of W.
void four_bit_forward_amx(const FourBitMatrix& w, const uint16_t* x, int64_t m,
                          const uint16_t* bias, uint16_t* y);

}  // namespace mantissa::kernels::quant
