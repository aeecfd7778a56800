// Copies between the CPU and a GPU and on a GPU, for the Tensor members in tensor.cpp.
#include "core/cuda/tensor_transfer.h"

#include <cmath>

#include "mantissa/core/cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/copy_kernels.h"
#include "core/cuda/cuda_runtime.h"
#include "core/inplace.h"
#include "core/strided_loops.h"
#endif

namespace mantissa::detail {

#if MANTISSA_HAS_CUDA
cuda::detail::Scalar cuda_scalar_of(DType dt, const char* who) {
  using cuda::detail::Scalar;
  switch (dt.id()) {
    case DType::Id::f64:
      return Scalar::f64;
    case DType::Id::f32:
      return Scalar::f32;
    case DType::Id::f16:
      return Scalar::f16;
    case DType::Id::bf16:
      return Scalar::bf16;
    case DType::Id::i64:
      return Scalar::i64;
    case DType::Id::i32:
      return Scalar::i32;
    case DType::Id::u8:
      return Scalar::u8;
    case DType::Id::i8:
      return Scalar::i8;
    case DType::Id::b8:
      return Scalar::b8;
    default:
      break;
  }
  throw Error(
      fmt::format("[{}] {} tensors are not supported on CUDA devices yet (float64, "
                  "float32, float16, bfloat16 and the integer and bool dtypes are); "
                  "keep this tensor on the CPU",
                  who, dt.name()));
}

namespace {
using cuda::detail::Scalar;
const auto scalar_of = cuda_scalar_of;

bool scalar_supported(DType dt) {
  return dt.is_floating_point()
             ? dt.itemsize() >= 2
             : !dt.is_complex() && dt.id() != DType::Id::f8_e4m3 && dt.id() != DType::Id::f8_e5m2;
}

// The layout of a copy of src (broadcast to dst's shape) into dst.
cuda::detail::CopyLayout layout_of(const Tensor& dst, const Tensor& src, const char* who) {
  cuda::detail::CopyLayout l;
  const Shape bstrides = kernels::broadcast_strides(src, dst.shape());
  MANTISSA_CHECK(dst.dim() <= cuda::detail::kMaxDims, who,
                 "tensors of more than {} dimensions are not supported on CUDA devices (got {})",
                 cuda::detail::kMaxDims, dst.dim());
  l.dims = static_cast<int>(dst.dim());
  for (int d = 0; d < l.dims; ++d) {
    l.sizes[d] = dst.shape()[d];
    l.src_strides[d] = bstrides[d];
    l.dst_strides[d] = dst.strides()[d];
  }
  return l;
}

// Same GPU: one kernel (or a memcpy when nothing is strided or cast).
void copy_on_gpu(const Tensor& dst, const Tensor& src) {
  cuda::detail::DeviceGuard guard(dst.device());
  const bool plain = src.dtype() == dst.dtype() && src.shape() == dst.shape() &&
                     src.is_contiguous() && dst.is_contiguous();
  if (plain) {
    if (dst.nbytes())
      MANTISSA_CUDA_CHECK(cudaMemcpyAsync(dst.device_ptr(), src.device_ptr(), dst.nbytes(),
                                          cudaMemcpyDeviceToDevice,
                                          cuda::detail::current_stream()));
    return;
  }
  cuda::detail::launch_strided_convert(src.device_ptr(), scalar_of(src.dtype(), "copy_"),
                                       dst.device_ptr(), scalar_of(dst.dtype(), "copy_"),
                                       layout_of(dst, src, "copy_"), dst.numel());
}
}  // namespace

Tensor cuda_contiguous_as(const Tensor& t, DType dtype) {
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_on_gpu(out, t);
  return out;
}

void cuda_fill(const Tensor& t, double value) {
  cuda::detail::DeviceGuard guard(t.device());
  const Scalar type = scalar_of(t.dtype(), "fill_");
  if (t.is_contiguous()) {
    if (value == 0.0 && !std::signbit(value)) {
      if (t.nbytes())
        MANTISSA_CUDA_CHECK(
            cudaMemsetAsync(t.device_ptr(), 0, t.nbytes(), cuda::detail::current_stream()));
    } else {
      cuda::detail::launch_fill(t.device_ptr(), type, value, t.numel());
    }
    return;
  }
  Tensor one = empty({}, t.dtype(), t.device());
  cuda::detail::launch_fill(one.device_ptr(), type, value, 1);
  copy_on_gpu(t, one);
}

void cuda_convert_many(const std::vector<Tensor>& src, const std::vector<Tensor>& dst) {
  MANTISSA_CHECK(src.size() == dst.size(), "convert_many", "{} sources for {} destinations",
                 src.size(), dst.size());
  if (src.empty()) return;
  const Device dev = dst[0].device();
  std::vector<const void*> s;
  std::vector<void*> d;
  std::vector<int64_t> n;
  for (size_t i = 0; i < src.size(); ++i) {
    MANTISSA_CHECK(src[i].device() == dev && dst[i].device() == dev && src[i].is_contiguous() &&
                       dst[i].is_contiguous() && src[i].shape() == dst[i].shape() &&
                       src[i].dtype() == src[0].dtype() && dst[i].dtype() == dst[0].dtype(),
                   "convert_many",
                   "internal error: tensor {} is not a contiguous {} -> {} pair on {}", i,
                   src[0].dtype().name(), dst[0].dtype().name(), dev.str());
    s.push_back(src[i].device_ptr());
    d.push_back(dst[i].device_ptr());
    n.push_back(src[i].numel());
  }
  cuda::detail::DeviceGuard guard(dev);
  cuda::detail::launch_convert_many(s.data(), scalar_of(src[0].dtype(), "convert_many"), d.data(),
                                    scalar_of(dst[0].dtype(), "convert_many"), n.data(),
                                    static_cast<int64_t>(n.size()));
}

void copy_with_device(const Tensor& dst, const Tensor& src) {
  const Device dd = dst.device(), sd = src.device();
  if (dd.is_cuda() && sd == dd) return copy_on_gpu(dst, src);
  {
    // A graph replays GPU work only: the host side of this copy would not happen again.
    cuda::detail::DeviceGuard guard(dd.is_cuda() ? dd : sd);
    if (cuda::detail::stream_is_capturing())
      cuda::detail::refuse_during_capture(
          fmt::format("a copy from {} to {} (to(), item(), or a host tensor given to a GPU op)",
                      sd.str(), dd.str())
              .c_str());
  }
  if (dd.is_cuda()) {
    // To the GPU: src to its own device as it is (contiguous, own dtype), then cast there.
    Tensor host = src.device().is_cpu() ? src.contiguous() : src.to(kCPU);
    Tensor staged = empty(host.shape(), host.dtype(), dd);
    {
      cuda::detail::DeviceGuard guard(dd);
      if (host.nbytes())
        // Pageable host memory: the call returns once the bytes are staged, so `host` may go.
        MANTISSA_CUDA_CHECK(cudaMemcpyAsync(staged.device_ptr(), host.data_ptr(), host.nbytes(),
                                            cudaMemcpyHostToDevice,
                                            cuda::detail::current_stream()));
    }
    return copy_on_gpu(dst, staged);
  }
  // To the CPU: a contiguous copy in dst's dtype on the GPU (when it is a dtype the GPU
  // stores), down in one transfer, then the CPU's own broadcasting copy.
  const bool gpu_cast = dst.dtype() != src.dtype() && scalar_supported(dst.dtype());
  Tensor packed = src.is_contiguous() && !gpu_cast
                      ? src
                      : cuda_contiguous_as(src, gpu_cast ? dst.dtype() : src.dtype());
  Tensor host = empty(packed.shape(), packed.dtype());
  {
    cuda::detail::DeviceGuard guard(sd);
    if (host.nbytes()) {
      MANTISSA_CUDA_CHECK(cudaMemcpyAsync(host.data_ptr(), packed.device_ptr(), host.nbytes(),
                                          cudaMemcpyDeviceToHost, cuda::detail::current_stream()));
      MANTISSA_CUDA_CHECK(cudaStreamSynchronize(cuda::detail::current_stream()));
    }
  }
  mantissa::detail::copy_unchecked(Tensor(dst), host);
}

#else  // built without the CUDA backend: no tensor can be on a GPU, so these are never reached

Tensor cuda_contiguous_as(const Tensor&, DType) {
  throw Error("[cuda] " + cuda::unavailable_reason());
}
void cuda_fill(const Tensor&, double) { throw Error("[cuda] " + cuda::unavailable_reason()); }
void cuda_convert_many(const std::vector<Tensor>&, const std::vector<Tensor>&) {
  throw Error("[cuda] " + cuda::unavailable_reason());
}
void copy_with_device(const Tensor&, const Tensor&) {
  throw Error("[cuda] " + cuda::unavailable_reason());
}

#endif

}  // namespace mantissa::detail
