#pragma once
// The 4-bit Linear's products on AMX tiles for few input rows, the weight decoded a few rows at
// a time and multiplied from there: no dequantized copy of the weight in memory and no
// repacking of it (docs/quantization.md, "4-bit products on AMX").
//
// The forward is computed transposed, y^T = W x^T: a row of W is then a row of an AMX A tile, so
// the decoded rows are multiplied as they are, and only x (small on this path) is rearranged,
// once per call, into the tiles' k-pair layout. The input gradient g W takes W as the B operand:
// pairs of its rows are interleaved into that layout as they are decoded. Sums are fp32 in the
// tiles; results are rounded once to bf16 (round to nearest even), after adding the bias.
#include <cstdint>

#include "kernels/cpu/quant/four_bit_tables.h"

namespace mantissa::kernels::quant {

// A 4-bit matrix of rows x cols in bitsandbytes' layout (four_bit.h): flat row-major elements in
// blocks of `blocksize`, with one float32 absmax per block (double quantization resolved).
struct FourBitMatrix {
  const uint8_t* packed = nullptr;
  const float* absmax = nullptr;
  int64_t rows = 0, cols = 0, blocksize = 0;
  FormatId format = FormatId::kNf4;  // kNf4 or kFp4
};

// Input rows up to which the 4-bit Linear's products take these kernels. They read all of x^T
// (all of g) once per group of W's rows (per panel), cheap while it fits L2. bench_linear4bit
// on the AMX Xeon, NF4 / bf16 speed of forward + input gradient: at 64 rows 0.66-0.70 before
// them, 0.85-0.88 with them; at 256 rows (MLP) 0.85-1.01 against 0.70-0.76 for oneDNN on 1 MiB
// chunks of dequantized weight; at 512 rows (the 100M GPT's 768 x 3072 layers) 0.89-1.06
// against 0.79-0.81; at 768 rows level or ahead (0.82-1.16 against 0.83-0.87); at 1024 rows
// behind (0.78 against 0.93), and at 2048 rows far behind (0.64-0.69 against 1.04-1.07).
inline constexpr int64_t kFourBitAmxMaxRows = 768;

// Whether this process can run these kernels: the CPU has AMX bf16 tiles and the AVX-512 level
// (MANTISSA_DISABLE_SIMD leaving both on), and Linux granted the tile state (asked once, with
// arch_prctl).
bool amx_bf16_usable();

// y (m x w.rows, bf16) = x (m x w.cols, bf16, contiguous) @ W^T + bias (w.rows bf16 values, or
// null). Requires amx_bf16_usable(). Threads over 16-row panels of W.
void four_bit_forward_amx(const FourBitMatrix& w, const uint16_t* x, int64_t m,
                          const uint16_t* bias, uint16_t* y);

// dx (m x w.cols, bf16) = g (m x w.rows, bf16, contiguous) @ W: the input gradient of the same
// layer, W decoded 256 rows at a time per thread (only that thread's columns) into the tiles'
// k-pair layout. fp32 sums, rounded once. Requires amx_bf16_usable(). Threads over columns.
void four_bit_input_grad_amx(const FourBitMatrix& w, const uint16_t* g, int64_t m, uint16_t* dx);

}  // namespace mantissa::kernels::quant
