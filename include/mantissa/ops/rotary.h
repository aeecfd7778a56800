#pragma once
// Rotary position embeddings (RoPE) in the "rotate_half" layout of Hugging Face transformers'
// Llama: the head dimension D is split into two halves [x1, x2] (not interleaved pairs), and
//
//   rope(x) = x * cos + rotate_half(x) * sin,   rotate_half([x1, x2]) = [-x2, x1]
//
// where cos and sin hold cos(p * f_i) and sin(p * f_i) for position p, repeated over both halves
// (f_i the inverse frequency of pair i). Both ops are differentiable.
#include "mantissa/core/tensor.h"

namespace mantissa {

// [x1, x2] -> [-x2, x1] along the last dimension, which must be even.
Tensor rotate_half(const Tensor& x);

// x (..., T, D); cos and sin (T, D), broadcast over the leading dimensions and cast to x's dtype
// first (as transformers does), so the arithmetic runs in x's dtype.
Tensor apply_rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace mantissa
