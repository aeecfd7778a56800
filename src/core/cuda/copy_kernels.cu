// Element copies on a GPU: one grid-stride kernel for strided / broadcasting / casting copies,
// one for contiguous casts, one for fills.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/copy_kernels.h"
#include "core/cuda/launch.h"

namespace mantissa::cuda::detail {
namespace {

__device__ __forceinline__ bool is_integer(Scalar t) {
  return t == Scalar::i64 || t == Scalar::i32 || t == Scalar::u8 || t == Scalar::i8 ||
         t == Scalar::b8;
}

__device__ __forceinline__ double load_f(const void* p, Scalar t, int64_t i) {
  switch (t) {
    case Scalar::f64: return static_cast<const double*>(p)[i];
    case Scalar::f32: return static_cast<const float*>(p)[i];
    case Scalar::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case Scalar::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Scalar::i64: return static_cast<double>(static_cast<const long long*>(p)[i]);
    case Scalar::i32: return static_cast<const int*>(p)[i];
    case Scalar::u8: return static_cast<const unsigned char*>(p)[i];
    case Scalar::i8: return static_cast<const signed char*>(p)[i];
    case Scalar::b8: return static_cast<const unsigned char*>(p)[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

__device__ __forceinline__ long long load_i(const void* p, Scalar t, int64_t i) {
  switch (t) {
    case Scalar::i64: return static_cast<const long long*>(p)[i];
    case Scalar::i32: return static_cast<const int*>(p)[i];
    case Scalar::u8: return static_cast<const unsigned char*>(p)[i];
    case Scalar::i8: return static_cast<const signed char*>(p)[i];
    case Scalar::b8: return static_cast<const unsigned char*>(p)[i] != 0;
    default: return 0;
  }
}

__device__ __forceinline__ void store_f(void* p, Scalar t, int64_t i, double v) {
  switch (t) {
    case Scalar::f64: static_cast<double*>(p)[i] = v; break;
    // double -> float rounds once; float -> half/bf16 would round twice, so go from double.
    case Scalar::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case Scalar::f16: static_cast<__half*>(p)[i] = __double2half(v); break;
    case Scalar::bf16: static_cast<__nv_bfloat16*>(p)[i] = __double2bfloat16(v); break;
    case Scalar::i64: static_cast<long long*>(p)[i] = static_cast<long long>(v); break;
    case Scalar::i32: static_cast<int*>(p)[i] = static_cast<int>(v); break;
    case Scalar::u8: static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(static_cast<int>(v)); break;
    case Scalar::i8: static_cast<signed char*>(p)[i] = static_cast<signed char>(static_cast<int>(v)); break;
    case Scalar::b8: static_cast<unsigned char*>(p)[i] = v != 0.0; break;
  }
}

__device__ __forceinline__ void store_i(void* p, Scalar t, int64_t i, long long v) {
  switch (t) {
    case Scalar::i64: static_cast<long long*>(p)[i] = v; break;
    case Scalar::i32: static_cast<int*>(p)[i] = static_cast<int>(v); break;
    case Scalar::u8: static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v); break;
    case Scalar::i8: static_cast<signed char*>(p)[i] = static_cast<signed char>(v); break;
    case Scalar::b8: static_cast<unsigned char*>(p)[i] = v != 0; break;
    default: break;
  }
}

__device__ __forceinline__ int size_of(Scalar t) {
  switch (t) {
    case Scalar::f64: case Scalar::i64: return 8;
    case Scalar::f32: case Scalar::i32: return 4;
    case Scalar::f16: case Scalar::bf16: return 2;
    default: return 1;
  }
}

__device__ __forceinline__ void move(const void* src, Scalar st, int64_t si, void* dst, Scalar dt,
                                     int64_t di) {
  if (st == dt) {  // the bits as they are (no float register: NaN payloads survive)
    switch (size_of(st)) {
      case 8: static_cast<unsigned long long*>(dst)[di] = static_cast<const unsigned long long*>(src)[si]; return;
      case 4: static_cast<unsigned*>(dst)[di] = static_cast<const unsigned*>(src)[si]; return;
      case 2: static_cast<unsigned short*>(dst)[di] = static_cast<const unsigned short*>(src)[si]; return;
      default: static_cast<unsigned char*>(dst)[di] = static_cast<const unsigned char*>(src)[si]; return;
    }
  }
  if (is_integer(st) && is_integer(dt))
    store_i(dst, dt, di, load_i(src, st, si));
  else
    store_f(dst, dt, di, load_f(src, st, si));
}

__global__ void strided_convert_kernel(const void* src, Scalar st, void* dst, Scalar dt,
                                       CopyLayout layout, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, so = 0, doff = 0;
    for (int d = layout.dims - 1; d >= 0; --d) {
      const int64_t idx = rest % layout.sizes[d];
      rest /= layout.sizes[d];
      so += idx * layout.src_strides[d];
      doff += idx * layout.dst_strides[d];
    }
    move(src, st, so, dst, dt, doff);
  }
}

__global__ void convert_kernel(const void* src, Scalar st, void* dst, Scalar dt, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    move(src, st, i, dst, dt, i);
}

__global__ void fill_kernel(void* dst, Scalar t, double value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f(dst, t, i, value);
}

}  // namespace

void launch_strided_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type,
                            const CopyLayout& layout, int64_t numel) {
  if (numel == 0) return;
  strided_convert_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(src, src_type, dst,
                                                                        dst_type, layout, numel);
  check_kernel_launch("strided_convert");
}

void launch_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type, int64_t numel) {
  if (numel == 0) return;
  convert_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(src, src_type, dst, dst_type,
                                                               numel);
  check_kernel_launch("convert");
}

void launch_fill(void* dst, Scalar type, double value, int64_t numel) {
  if (numel == 0) return;
  fill_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(dst, type, value, numel);
  check_kernel_launch("fill");
}

}  // namespace mantissa::cuda::detail
