// The fused attention ops (see attention_fused.h): operand views for the kernel, the forward
// call, and one backward node that recomputes the weights from the saved log-sum-exp.
#include "ops/attention_fused.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "amp/autocast_dispatch.h"
#include "core/inplace.h"
#include "kernels/cpu/attention/flash_attention.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::detail {
namespace {

using kernels::AttnOperand;
using kernels::AttnProblem;

// A (..., rows, cols) tensor as (batch, heads, rows, cols) with unit column stride: a 4-D
// tensor keeps its strides (head-split views need no copy) unless its columns are strided;
// any other rank is made contiguous and its leading dimensions flattened into the batch.
struct Operand {
  Tensor t;  // keeps the storage alive
  AttnOperand op;
  int64_t batch, heads;
};

Operand operand_of(const Tensor& x) {
  const int64_t d = x.dim();
  if (d == 4) {
    Tensor c = x.stride(3) == 1 ? x : x.contiguous();
    return {c, {c.device_ptr(), c.stride(0), c.stride(1), c.stride(2)}, c.size(0), c.size(1)};
  }
  Tensor c = x.contiguous();
  const int64_t rows = c.size(d - 2), cols = c.size(d - 1);
  return {c, {c.device_ptr(), rows * cols, 0, cols}, c.numel() / (rows * cols), 1};
}

AttnProblem problem_of(const Operand& q, const Tensor& query, const Tensor& key,
                       const Tensor& value, bool is_causal, double scale) {
  const int64_t d = query.dim();
  return {query.dtype(),     q.batch,         q.heads,
          query.size(d - 2), key.size(d - 2), query.size(d - 1),
          value.size(d - 1), is_causal,       scale};
}

DType lse_dtype(DType dt) { return dt == kFloat64 ? kFloat64 : kFloat32; }

// The fused kernels of the operands' device: the CPU's (kernels/cpu/attention/) or, on a GPU,
// the tensor-core ones (kernels/cuda/attention/, float16 and bfloat16 only).
void attention_forward(const Device& device, const AttnProblem& p, AttnOperand q, AttnOperand k,
                       AttnOperand v, AttnOperand o, void* lse) {
  if (device.is_cuda())
    return kernels::gpu_kernels().flash_attention_forward(device, p, q, k, v, o, lse);
  kernels::flash_attention_forward(p, q, k, v, o, lse);
}

void attention_backward(const Device& device, const AttnProblem& p, AttnOperand q, AttnOperand k,
                        AttnOperand v, AttnOperand o, AttnOperand dout, const void* lse,
                        AttnOperand dq, AttnOperand dk, AttnOperand dv) {
  if (device.is_cuda())
    return kernels::gpu_kernels().flash_attention_backward(device, p, q, k, v, o, dout, lse, dq, dk,
                                                           dv);
  kernels::flash_attention_backward(p, q, k, v, o, dout, lse, dq, dk, dv);
}

// Open ComposedGpuAttentionScopes on this thread.
thread_local int g_composed_scopes = 0;

// Whether the GPU's fused kernels take a (dtype, widths) problem (asked only for tensors on a
// GPU): false inside a ComposedGpuAttentionScope and with MANTISSA_CUDA_ATTENTION=composed;
// =fused overrides the scope. The environment is read at each call, so a test or a benchmark
// can compare the two forms in one process (docs/cuda.md).
bool gpu_fused_attention_applies(DType dtype, int64_t E, int64_t Ev) {
  const char* env = std::getenv("MANTISSA_CUDA_ATTENTION");
  const std::string_view choice = env != nullptr ? env : "";
  if (choice == "composed" || (g_composed_scopes > 0 && choice != "fused")) return false;
  return kernels::gpu_kernels().flash_attention_applies(dtype, E, Ev);
}

}  // namespace

bool fused_attention_applies(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& attn_mask, double dropout_p) {
  if (attn_mask.defined() || dropout_p != 0) return false;
  if (query.dtype().is_float8() || query.numel() == 0 || key.numel() == 0 || value.numel() == 0)
    return false;
  const int64_t d = query.dim();
  // On a GPU the fused kernels take float16 and bfloat16 (the composed form runs the rest: its
  // cuBLAS products keep float32 exact); mixed devices go on to the composed form's error.
  if (query.is_cuda() || key.is_cuda() || value.is_cuda()) {
    if (!(query.device() == key.device() && key.device() == value.device()) ||
        !gpu_fused_attention_applies(query.dtype(), query.size(d - 1), value.size(d - 1)))
      return false;
  }
  if (key.dim() != d || value.dim() != d) return false;
  for (int64_t i = 0; i < d - 2; ++i)
    if (key.size(i) != query.size(i) || value.size(i) != query.size(i)) return false;
  return true;
}

Tensor fused_attention(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal,
                       double scale) {
  MANTISSA_PROFILE_OP("attention");
  const Operand q = operand_of(query.detach()), k = operand_of(key.detach()),
                v = operand_of(value.detach());
  const AttnProblem p = problem_of(q, query, key, value, is_causal, scale);
  Shape out_shape = query.shape();
  out_shape.back() = p.Ev;
  const Device dev = query.device();
  Tensor out = empty(out_shape, p.dtype, dev);
  const Operand o = operand_of(out);
  Tensor lse = empty({p.batch * p.heads * p.L}, lse_dtype(p.dtype), dev);
  attention_forward(dev, p, q.op, k.op, v.op, o.op, lse.device_ptr());
  if (!autograd::needs_grad(query, key, value)) return out;
  // The output is saved detached: a handle on `out` itself would make a cycle through its node.
  // The backward reads q, k, v and the output (the log-sum-exp is internal).
  return autograd::record(
      out, {query, key, value}, {q.t, k.t, v.t, out}, "ScaledDotProductAttentionBackward",
      [q, k, v, saved = out.detach(), lse, p, dev](const Tensor& grad) {
        const Operand g = operand_of(grad.to(p.dtype));
        const Operand o = operand_of(saved);
        Tensor dq = empty(q.t.shape(), p.dtype, dev), dk = empty(k.t.shape(), p.dtype, dev),
               dv = empty(v.t.shape(), p.dtype, dev);
        attention_backward(dev, p, q.op, k.op, v.op, o.op, g.op, lse.device_ptr(),
                           operand_of(dq).op, operand_of(dk).op, operand_of(dv).op);
        return std::vector<Tensor>{dq, dk, dv};
      });
}

Tensor scaled_softmax(const Tensor& scores, double scale, bool causal) {
  MANTISSA_PROFILE_OP("softmax");
  MANTISSA_CHECK(scores.is_floating_point() && !scores.dtype().is_float8() && scores.dim() >= 2,
                 "scaled_softmax", "expected floating scores of at least 2 dimensions, got {} {}",
                 scores.dtype().name(), shape_str(scores.shape()));
  if (scores.is_cuda()) {
    Tensor y = kernels::gpu_kernels().scaled_softmax_forward(scores, scale, causal);
    if (!autograd::needs_grad(scores)) return y;
    Tensor saved = y.detach();
    return autograd::record(
        y, {scores}, {saved}, "ScaledSoftmaxBackward", [saved, scale](const Tensor& grad) {
          return std::vector<Tensor>{
              kernels::gpu_kernels().scaled_softmax_backward(saved, grad, scale)};
        });
  }
  MANTISSA_CHECK(false, "scaled_softmax", "runs on a GPU only (scores on {})",
                 scores.device().str());
  return Tensor();
}

namespace {

// (B, L, 3E) viewed as (3, B, heads, L, D): q, k and v of every head without a copy.
Tensor qkv_parts(const Tensor& t, int64_t B, int64_t L, int64_t heads, int64_t D) {
  return t.view({B, L, 3, heads, D}).permute({2, 0, 3, 1, 4});
}

// The packed attention on a GPU: batched matmuls and the fused scaled (causal) softmax on
// detached views of qkv, with one backward node that writes dq, dk and dv straight into one
// (B, L, 3E) gradient (no zero-filled copy per part, no sums of three full-size gradients, no
// permuted copy back to qkv's layout). float16 scales q before the product, as the composed
// form does, so the scores do not overflow first.
Tensor packed_attention_gpu(const Tensor& qkv, int64_t heads, bool is_causal) {
  const int64_t B = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, D = E / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const bool scale_q = qkv.dtype() == kFloat16;
  const double kernel_scale = scale_q ? 1.0 : scale;
  const Tensor x = qkv.detach();
  const Tensor p = qkv_parts(x, B, L, heads, D);
  const Tensor q = p.select(0, 0), k = p.select(0, 1), v = p.select(0, 2);
  const Tensor qs = scale_q ? mul(q, scale) : q;
  const Tensor w = scaled_softmax(matmul(qs, k.transpose(-2, -1)), kernel_scale, is_causal);
  const Tensor out = matmul(w, v).transpose(1, 2).reshape({B, L, E});
  if (!autograd::needs_grad(qkv)) return out;
  return autograd::record(
      out, {qkv}, {x, w}, "ScaledDotProductAttentionBackward",
      [x, w, qs, B, L, E, D, heads, scale, scale_q, kernel_scale](const Tensor& grad) {
        const Tensor g = grad.to(x.dtype()).reshape({B, L, heads, D}).transpose(1, 2);
        const Tensor p = qkv_parts(x, B, L, heads, D);
        const Tensor k = p.select(0, 1), v = p.select(0, 2);
        const Tensor dv = matmul(w.transpose(-2, -1), g);
        const Tensor ds = kernels::gpu_kernels().scaled_softmax_backward(
            w, matmul(g, v.transpose(-2, -1)), kernel_scale);
        const Tensor dqs = matmul(ds, k);
        const Tensor dk = matmul(ds.transpose(-2, -1), qs);
        Tensor dx = empty({B, L, 3 * E}, x.dtype(), x.device());
        const Tensor dp = qkv_parts(dx, B, L, heads, D);
        mantissa::detail::copy_unchecked(dp.select(0, 0), scale_q ? mul(dqs, scale) : dqs);
        mantissa::detail::copy_unchecked(dp.select(0, 1), dk);
        mantissa::detail::copy_unchecked(dp.select(0, 2), dv);
        return std::vector<Tensor>{dx};
      });
}

}  // namespace

Tensor packed_self_attention(const Tensor& qkv, int64_t heads, bool is_causal) {
  MANTISSA_PROFILE_OP("attention");
  MANTISSA_AUTOCAST("scaled_dot_product_attention", packed_self_attention, qkv, heads, is_causal);
  constexpr const char* kOp = "scaled_dot_product_attention";
  MANTISSA_CHECK(qkv.dim() == 3 && heads > 0 && qkv.size(2) % (3 * heads) == 0, kOp,
                 "packed qkv must be (B, L, 3 * heads * D), got shape {} for {} heads",
                 shape_str(qkv.shape()), heads);
  MANTISSA_CHECK(qkv.is_floating_point() && !qkv.dtype().is_float8(), kOp,
                 "query, key and value must be floating, got {}", qkv.dtype().name());
  const int64_t B = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, D = E / heads;
  if (qkv.is_cuda() && !gpu_fused_attention_applies(qkv.dtype(), D, D))
    return packed_attention_gpu(qkv, heads, is_causal);
  // The fused kernels of qkv's device (a GPU's take float16 and bfloat16, widths up to 128).
  const Device dev = qkv.device();
  const Tensor x = qkv.detach().contiguous();
  Tensor out = empty({B, L, E}, qkv.dtype(), dev);
  // Row stride 3E inside (B, L, 3E); head h's D columns start at h * D in each third.
  auto part = [E, L, D](const Tensor& t, int64_t third) {
    const int64_t width = t.size(2);
    return AttnOperand{static_cast<char*>(t.device_ptr()) + third * E * t.element_size(), L * width,
                       D, width};
  };
  const AttnProblem p{qkv.dtype(), B, heads, L, L, D, D, is_causal, 1.0 / std::sqrt(double(D))};
  Tensor lse = empty({B * heads * L}, lse_dtype(p.dtype), dev);
  if (out.numel() > 0)
    attention_forward(dev, p, part(x, 0), part(x, 1), part(x, 2), part(out, 0), lse.device_ptr());
  if (!autograd::needs_grad(qkv)) return out;
  return autograd::record(out, {qkv}, {x, out}, "ScaledDotProductAttentionBackward",
                          [x, saved = out.detach(), lse, p, part, dev](const Tensor& grad) {
                            const Tensor g = grad.to(p.dtype).contiguous();
                            Tensor dx = empty(x.shape(), p.dtype, dev);
                            if (dx.numel() > 0)
                              attention_backward(dev, p, part(x, 0), part(x, 1), part(x, 2),
                                                 part(saved, 0), part(g, 0), lse.device_ptr(),
                                                 part(dx, 0), part(dx, 1), part(dx, 2));
                            return std::vector<Tensor>{dx};
                          });
}

}  // namespace mantissa::detail

namespace mantissa {

ComposedGpuAttentionScope::ComposedGpuAttentionScope() { ++detail::g_composed_scopes; }
ComposedGpuAttentionScope::~ComposedGpuAttentionScope() { --detail::g_composed_scopes; }

}  // namespace mantissa
