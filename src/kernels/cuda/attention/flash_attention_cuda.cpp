// The fused attention's CUDA branch (flash_attention_cuda.h).
#include "kernels/cuda/attention/flash_attention_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/attention/flash_attention_kernels.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::gpu {
namespace {

cuda::detail::FlashOperand operand(AttnOperand o) { return {o.data, o.sb, o.sh, o.sr}; }

cuda::detail::FlashShape shape_of(const AttnProblem& p) {
  MANTISSA_CHECK(flash_attention_applies(p.dtype, p.E, p.Ev), "scaled_dot_product_attention",
                 "internal: no GPU flash kernel for {} with widths {} and {}", p.dtype.name(), p.E,
                 p.Ev);
  return {p.batch, p.heads, p.L, p.S, p.E, p.causal, p.scale};
}

}  // namespace

bool flash_attention_applies(DType dtype, int64_t E, int64_t Ev) {
  if (dtype != kFloat16 && dtype != kBFloat16) return false;
  return E == Ev &&
         cuda::detail::flash_attention_supports(detail::cuda_scalar_of(dtype, "attention"), E);
}

void flash_attention_forward(const Device& device, const AttnProblem& p, AttnOperand q,
                             AttnOperand k, AttnOperand v, AttnOperand o, void* lse) {
  const cuda::detail::FlashShape shape = shape_of(p);
  cuda::detail::DeviceGuard guard(device);
  cuda::detail::launch_flash_attention_forward(detail::cuda_scalar_of(p.dtype, "attention"), shape,
                                               operand(q), operand(k), operand(v), operand(o),
                                               static_cast<float*>(lse));
}

void flash_attention_backward(const Device& device, const AttnProblem& p, AttnOperand q,
                              AttnOperand k, AttnOperand v, AttnOperand o, AttnOperand dout,
                              const void* lse, AttnOperand dq, AttnOperand dk, AttnOperand dv) {
  const cuda::detail::FlashShape shape = shape_of(p);
  cuda::detail::DeviceGuard guard(device);
  cuda::detail::launch_flash_attention_backward(detail::cuda_scalar_of(p.dtype, "attention"), shape,
                                                operand(q), operand(k), operand(v), operand(o),
                                                operand(dout), static_cast<const float*>(lse),
                                                operand(dq), operand(dk), operand(dv));
}

}  // namespace mantissa::kernels::gpu

#endif
