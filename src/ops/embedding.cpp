// embedding: forward copies rows of the table; backward scatter-adds gradient rows back.
#include "mantissa/ops/embedding.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/device_check.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/cuda_graph.h"

namespace mantissa {
namespace {

// The indices as int64, contiguous, after checking every one is in range.
std::vector<int64_t> checked_indices(const Tensor& indices, int64_t num) {
  std::vector<int64_t> idx = indices.to_vector<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i) {
    MANTISSA_CHECK(idx[i] >= 0 && idx[i] < num, "embedding",
                   "index {} at flat position {} is out of range for a table of {} rows "
                   "(indices shape {})",
                   idx[i], i, num, shape_str(indices.shape()));
  }
  return idx;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  MANTISSA_PROFILE_OP("embedding");
  MANTISSA_AUTOCAST("embedding", embedding, weight, indices);
  MANTISSA_CHECK(weight.dim() == 2, "embedding",
                 "weight must be 2-D (num_embeddings, embedding_dim), got shape {}",
                 shape_str(weight.shape()));
  MANTISSA_CHECK(weight.is_floating_point() && !weight.dtype().is_float8(), "embedding",
                 "weight must be floating (float64, float32, float16, bfloat16), got {}",
                 weight.dtype().name());
  MANTISSA_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, "embedding",
                 "indices must be int64 or int32, got {}", indices.dtype().name());
  const int64_t num = weight.size(0), dim = weight.size(1);
  if (kernels::gpu::any_cuda({&weight, &indices})) {
    (void)kernels::gpu::common_device("embedding", {&weight, &indices});
    // On the host (one synchronisation), except while a CUDA graph is captured: the indices'
    // values come with each replay, and the kernel turns one out of range into a NaN row.
    if (!cuda::is_current_stream_capturing()) (void)checked_indices(indices.cpu(), num);
    kernels::gpu::EmbeddingForward f = kernels::gpu_kernels().embedding_forward(weight, indices);
    if (!autograd::needs_grad(weight)) return f.out;
    return autograd::record(f.out, {weight}, "EmbeddingBackward",
                            [idx = f.indices, num, dim](const Tensor& grad) {
                              return std::vector<Tensor>{
                                  kernels::gpu_kernels().embedding_backward(grad, idx, num, dim)};
                            });
  }
  auto idx = std::make_shared<std::vector<int64_t>>(checked_indices(indices, num));
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor w = weight.detach().contiguous();
  Tensor out = empty(out_shape, weight.dtype());
  const size_t row_bytes = static_cast<size_t>(dim) * weight.element_size();
  const auto* src = static_cast<const char*>(w.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t count = static_cast<int64_t>(idx->size());
#pragma omp parallel for schedule(static) if (count * dim > kernels::kParallelGrain)
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + i * row_bytes, src + (*idx)[i] * row_bytes, row_bytes);
  if (!autograd::needs_grad(weight)) return out;
  return autograd::record(out, {weight}, "EmbeddingBackward", [idx, num, dim](const Tensor& grad) {
    const DType dt = grad.dtype();
    Tensor g = grad.contiguous();
    const DType acc_dt = dt == kFloat64 ? kFloat64 : kFloat32;
    Tensor acc = zeros({num, dim}, acc_dt);
    kernels::dispatch_floating(dt, "embedding", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = kernels::acc_t<T>;
      const T* gp = g.data<T>();
      A* ap = acc.data<A>();
      // Serial over indices: repeated rows add in a fixed order.
      for (size_t i = 0; i < idx->size(); ++i) {
        A* row = ap + (*idx)[i] * dim;
        const T* gr = gp + static_cast<int64_t>(i) * dim;
        for (int64_t j = 0; j < dim; ++j) row[j] += kernels::load(gr[j]);
      }
    });
    return std::vector<Tensor>{acc.to(dt)};
  });
}

}  // namespace mantissa
