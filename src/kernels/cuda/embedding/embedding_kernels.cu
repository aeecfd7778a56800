// embedding kernels (embedding_kernels.h): one thread per output element (adjacent threads
// copy adjacent elements of a row).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/embedding/embedding_kernels.h"

namespace mantissa::cuda::detail {
namespace {

// E: an unsigned integer of the element's width; all ones but the sign bit is a NaN of every
// floating type of that width (f16 and bf16 alike).
template <typename E>
__global__ void gather_rows_kernel(const E* w, const int64_t* idx, E* out, int64_t count,
                                   int64_t num, int64_t dim) {
  const int64_t n = count * dim;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t row = i / dim, j = i % dim;
    const int64_t r = idx[row];
    out[i] = r >= 0 && r < num ? w[r * dim + j] : static_cast<E>(static_cast<E>(~E(0)) >> 1);
  }
}

template <Scalar S>
__global__ void scatter_add_rows_kernel(const elem_t<S>* g, const int64_t* idx, acc_t<S>* acc,
                                        int64_t count, int64_t num, int64_t dim) {
  const int64_t n = count * dim;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t row = i / dim, j = i % dim;
    const int64_t r = idx[row];
    if (r >= 0 && r < num) atomicAdd(acc + r * dim + j, load<S>(g, i));
  }
}

template <typename E>
void gather(const void* w, const int64_t* idx, void* out, int64_t count, int64_t num, int64_t dim) {
  gather_rows_kernel<E><<<grid_for(count * dim), 256, 0, current_stream()>>>(
      static_cast<const E*>(w), idx, static_cast<E*>(out), count, num, dim);
}

}  // namespace

void launch_embedding_forward(const void* weight, const int64_t* idx, void* out, int64_t count,
                              int64_t num, int64_t dim, int elem_bytes) {
  if (count * dim == 0) return;
  switch (elem_bytes) {
    case 2:
      gather<unsigned short>(weight, idx, out, count, num, dim);
      break;
    case 4:
      gather<unsigned int>(weight, idx, out, count, num, dim);
      break;
    default:
      gather<unsigned long long>(weight, idx, out, count, num, dim);
      break;
  }
  check_kernel_launch("embedding");
}

void launch_embedding_backward(const void* g, Scalar type, const int64_t* idx, void* acc,
                               int64_t count, int64_t num, int64_t dim) {
  if (count * dim == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    scatter_add_rows_kernel<S><<<grid_for(count * dim), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(g), idx, static_cast<acc_t<S>*>(acc), count, num, dim);
  })
  check_kernel_launch("embedding_backward");
}

}  // namespace mantissa::cuda::detail
