#pragma once
// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention).
#include <optional>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa {

// query (..., L, E), key (..., S, E), value (..., S, Ev); the leading (batch, head)
// dimensions broadcast. Returns (..., L, Ev):
//   softmax(q k^T * scale + mask) v, with dropout(p = dropout_p) on the attention weights.
// attn_mask (broadcasting to (..., L, S)): kBool, true where a query may attend (PyTorch's
// convention), or floating, added to the scores. is_causal masks key j > query i (top-left
// aligned, as PyTorch) and cannot be combined with attn_mask. scale defaults to 1/sqrt(E).
// Dropout masks come from `gen` (the default generator when null); pass dropout_p = 0 for
// evaluation. Differentiable in query, key, value (and a floating mask). The two products run
// in the inputs' dtype with fp32 accumulation; the softmax always computes in fp32 (f64 for
// f64). Under autocast the op runs in lower precision (PyTorch's CPU list).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

// While one is alive on this thread, attention on a GPU takes the composed form (the cuBLAS
// products around the fused scaled softmax) instead of the fused flash kernels. The FP8
// precisions' forward holds one: with the fused kernels, FP8 training of the GPT-2-sized model
// did not learn where the composed form did (docs/cuda.md, "Attention under FP8"). The
// environment overrides it: MANTISSA_CUDA_ATTENTION=fused takes the fused kernels wherever they
// apply, =composed the composed form everywhere. Nests; no effect on the CPU.
class ComposedGpuAttentionScope {
 public:
  ComposedGpuAttentionScope();
  ~ComposedGpuAttentionScope();
  ComposedGpuAttentionScope(const ComposedGpuAttentionScope&) = delete;
  ComposedGpuAttentionScope& operator=(const ComposedGpuAttentionScope&) = delete;
};

}  // namespace mantissa
