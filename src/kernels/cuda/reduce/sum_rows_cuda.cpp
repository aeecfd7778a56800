// kernels::sum_rows (linear's bias gradient) on a GPU: core's deterministic column sum.
#include "kernels/cuda/reduce/reduce_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_reduce.h"

namespace mantissa::kernels::gpu {

Tensor sum_rows(const Tensor& g2) {
  MANTISSA_CHECK(g2.dim() == 2 && g2.is_floating_point(), "linear",
                 "internal: sum_rows expects a floating (rows, n) tensor, got {} {}",
                 g2.dtype().name(), shape_str(g2.shape()));
  return detail::cuda_sum(g2, {true, false}, {g2.size(1)}, /*mean=*/false);
}

}  // namespace mantissa::kernels::gpu

#endif
