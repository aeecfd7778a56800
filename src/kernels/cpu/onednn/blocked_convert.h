#pragma once
// bf16/f16 activations in plain NCHW <-> float32 in oneDNN's channel-blocked layouts nChw8c and
// nChw16c (aBcd8b / aBcd16b: [N][C/B][H*W][B]), the dtype conversion and the layout change in one
// pass. Where the CPU has no bf16 (or any f16) convolution, oneDNN convolves in float32 on its
// blocked layouts: bf16/f16 operands were widened in one pass and reordered in a second, and the
// results reordered and then rounded; these kernels do each in one (oneDNN's own converting
// reorders take its reference path on AVX2 and were ~200x slower). The bits are Tensor::to's.
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// Whether the kernels below take this case: a bf16 or f16 tensor, a block of 8 or 16 channels
// that divides `channels` (no padded channels to fill).
bool blocked_convert_applies(DType low, int64_t channels, int64_t block);

// src: n x c x hw values of dtype `low` (NCHW); dst: float32 in nChw<block>c.
void widen_to_blocked(DType low, const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw,
                      int64_t block);
// src: float32 in nChw<block>c; dst: n x c x hw values of dtype `low` (NCHW), rounded to nearest
// even as Tensor::to rounds.
void round_from_blocked(DType low, const float* src, uint16_t* dst, int64_t n, int64_t c,
                        int64_t hw, int64_t block);

}  // namespace mantissa::kernels
