// GradScaler's check-and-unscale on a GPU (unscale_kernels.h): the gradients in multi-tensor
// launches, the flag raised by any warp that sees a non-finite value (every writer stores the
// same 1.0f, so the race is benign).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/launch.h"
#include "kernels/cuda/amp/unscale_kernels.h"
#include "kernels/cuda/common/device_math.cuh"

namespace mantissa::cuda::detail {
namespace {

// ---- Many gradients per launch (as the optimizers' multi-tensor Adam).
constexpr int kUnscaleTensors = 64;
constexpr int64_t kUnscaleChunk = 256 * 8;

struct UnscaleTensor {
  void* data;
  int64_t n;
  int64_t first_block;
};
struct UnscaleBatch {
  UnscaleTensor t[kUnscaleTensors];
  int count;
};

template <typename T>
__global__ void unscale_multi_kernel(UnscaleBatch b, float* found_inf, const float* inv_scale) {
  using A = typename AccOf<T>::type;
  int k = 0;
  while (k + 1 < b.count && b.t[k + 1].first_block <= static_cast<int64_t>(blockIdx.x)) ++k;
  const UnscaleTensor& t = b.t[k];
  T* x = static_cast<T*>(t.data);
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - t.first_block) * kUnscaleChunk;
  const int64_t end = begin + kUnscaleChunk < t.n ? begin + kUnscaleChunk : t.n;
  const float inv_f = *inv_scale;
  const bool multiply = inv_f != 1.0f;
  const A inv = static_cast<A>(inv_f);
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const A v = load(x + i);
    if (!isfinite(v)) bad = true;
    if (multiply) store(x + i, mul(v, inv));
  }
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) *found_inf = 1.0f;
}

template <typename T>
void unscale_multi(void* const* data, const int64_t* n, int64_t count, float* found_inf,
                   const float* inv_scale) {
  for (int64_t first = 0; first < count;) {
    UnscaleBatch b{};
    int64_t blocks = 0;
    while (first < count && b.count < kUnscaleTensors) {
      if (n[first] > 0) {
        b.t[b.count] = {data[first], n[first], blocks};
        blocks += (n[first] + kUnscaleChunk - 1) / kUnscaleChunk;
        ++b.count;
      }
      ++first;
    }
    if (b.count == 0) continue;
    unscale_multi_kernel<T>
        <<<static_cast<unsigned>(blocks), 256, 0, current_stream()>>>(b, found_inf, inv_scale);
    check_kernel_launch("non_finite_check_and_unscale");
  }
}

}  // namespace

bool launch_non_finite_check_and_unscale_multi(void* const* data, const int64_t* n, int64_t count,
                                               Scalar type, float* found_inf,
                                               const float* inv_scale) {
  switch (type) {
    case Scalar::f64:
      return unscale_multi<double>(data, n, count, found_inf, inv_scale), true;
    case Scalar::f32:
      return unscale_multi<float>(data, n, count, found_inf, inv_scale), true;
    case Scalar::f16:
      return unscale_multi<__half>(data, n, count, found_inf, inv_scale), true;
    case Scalar::bf16:
      return unscale_multi<__nv_bfloat16>(data, n, count, found_inf, inv_scale), true;
    default:
      return false;
  }
}

}  // namespace mantissa::cuda::detail
