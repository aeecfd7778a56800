#pragma once
// Whether the block-format product (mx_gemm.cpp) may run the bf16 register tile
// (kernels/cpu/gemm/bf16_pair_tile.h) with the fp32 tile's bits: every partial sum must be
// zero or a normal fp32 number. Each decoded value of an operand (element times block scale) is
// a multiple of 2^l, l = the element's smallest step (E4M3 2^-9, E5M2 2^-16, E2M1 2^-1) times
// the operand's smallest scale (an NVFP4 E4M3 scale: 2^-9), and below 2^h, h = its largest
// magnitude's bound times the largest scale; so is every product (2^(la + lb)) and every sum of
// them rounded to fp32. With la + lb >= -126 no nonzero sum is subnormal, and with
// ha + hb + ceil(log2 K) <= 127 none overflows. The scales are read once per product (1/16 to
// 1/32 of the codes); NaN scales and codes (and E5M2 infinities) are left to the panel packing,
// which finds their values and hands the rest of the task to the fp32 tile.
#include <cstdint>

#include "kernels/cpu/mx/mx_gemm.h"

namespace mantissa::kernels::mx {

bool bf16_sums_exact(const MxOperandView& a, const MxOperandView& b, int64_t K);

}  // namespace mantissa::kernels::mx
