#pragma once
// The fused path of scaled_dot_product_attention (kernels/cpu/attention/flash_attention.h): no (L,
// S) weights in memory, one autograd node. scaled_dot_product_attention routes to it by itself;
// MultiheadAttention also calls the packed form, which reads q, k and v straight from the
// in-projection's (B, L, 3E) output and writes (B, L, E), so heads are split and merged
// without copies and the three gradients land in one (B, L, 3E) tensor.
#include "mantissa/core/tensor.h"

namespace mantissa::detail {

// True when the fused kernel covers the call: no explicit mask, no dropout, query, key and value
// of one floating (non-fp8) dtype with the same leading dimensions (no broadcasting) and no
// empty dimension. On a GPU also: float16 or bfloat16, one device, the value as wide as the
// query and at most 128 wide (kernels/cuda/attention/); float32 and float64 take the composed
// form there, whose cuBLAS products keep them exact.
bool fused_attention_applies(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& attn_mask, double dropout_p);

// query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev); arguments already
// checked by scaled_dot_product_attention (and fused_attention_applies).
Tensor fused_attention(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal,
                       double scale);

// Self-attention on a packed projection: qkv (B, L, 3E), laid out (3, heads, E / heads) along
// its last dimension as MultiheadAttention's in_proj, -> (B, L, E) with the heads side by
// side. Scale 1/sqrt(E / heads). Autocast as scaled_dot_product_attention. On a GPU the fused
// kernels run it where fused_attention_applies would take the heads, else the composed form.
Tensor packed_self_attention(const Tensor& qkv, int64_t heads, bool is_causal);

// The composed attention's middle on a GPU: softmax(scale * scores) over the last dimension, with
// `causal` masking the entries j > i (i the index along dimension -2) to 0 by index, in one
// kernel and one autograd node ("ScaledSoftmaxBackward"); scores on a GPU, at least 2-D. The
// output has the scores' dtype (fp32 arithmetic inside); no autocast of its own (attention
// already applied it).
Tensor scaled_softmax(const Tensor& scores, double scale, bool causal);

}  // namespace mantissa::detail
