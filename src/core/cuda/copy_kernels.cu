// Element copies on a GPU: one grid-stride kernel for strided / broadcasting / casting copies,
// one for contiguous casts, one for fills.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

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
    case Scalar::f64:
      return static_cast<const double*>(p)[i];
    case Scalar::f32:
      return static_cast<const float*>(p)[i];
    case Scalar::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Scalar::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Scalar::i64:
      return static_cast<double>(static_cast<const long long*>(p)[i]);
    case Scalar::i32:
      return static_cast<const int*>(p)[i];
    case Scalar::u8:
      return static_cast<const unsigned char*>(p)[i];
    case Scalar::i8:
      return static_cast<const signed char*>(p)[i];
    case Scalar::b8:
      return static_cast<const unsigned char*>(p)[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

__device__ __forceinline__ long long load_i(const void* p, Scalar t, int64_t i) {
  switch (t) {
    case Scalar::i64:
      return static_cast<const long long*>(p)[i];
    case Scalar::i32:
      return static_cast<const int*>(p)[i];
    case Scalar::u8:
      return static_cast<const unsigned char*>(p)[i];
    case Scalar::i8:
      return static_cast<const signed char*>(p)[i];
    case Scalar::b8:
      return static_cast<const unsigned char*>(p)[i] != 0;
    default:
      return 0;
  }
}

__device__ __forceinline__ void store_f(void* p, Scalar t, int64_t i, double v) {
  switch (t) {
    case Scalar::f64:
      static_cast<double*>(p)[i] = v;
      break;
    // double -> float rounds once; float -> half/bf16 would round twice, so go from double.
    case Scalar::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case Scalar::f16:
      static_cast<__half*>(p)[i] = __double2half(v);
      break;
    case Scalar::bf16:
      static_cast<__nv_bfloat16*>(p)[i] = __double2bfloat16(v);
      break;
    case Scalar::i64:
      static_cast<long long*>(p)[i] = static_cast<long long>(v);
      break;
    case Scalar::i32:
      static_cast<int*>(p)[i] = static_cast<int>(v);
      break;
    case Scalar::u8:
      static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(static_cast<int>(v));
      break;
    case Scalar::i8:
      static_cast<signed char*>(p)[i] = static_cast<signed char>(static_cast<int>(v));
      break;
    case Scalar::b8:
      static_cast<unsigned char*>(p)[i] = v != 0.0;
      break;
  }
}

__device__ __forceinline__ void store_i(void* p, Scalar t, int64_t i, long long v) {
  switch (t) {
    case Scalar::i64:
      static_cast<long long*>(p)[i] = v;
      break;
    case Scalar::i32:
      static_cast<int*>(p)[i] = static_cast<int>(v);
      break;
    case Scalar::u8:
      static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v);
      break;
    case Scalar::i8:
      static_cast<signed char*>(p)[i] = static_cast<signed char>(v);
      break;
    case Scalar::b8:
      static_cast<unsigned char*>(p)[i] = v != 0;
      break;
    default:
      break;
  }
}

// Bytes of one element; host code sizes its copies with it too.
__host__ __device__ __forceinline__ int size_of(Scalar t) {
  switch (t) {
    case Scalar::f64:
    case Scalar::i64:
      return 8;
    case Scalar::f32:
    case Scalar::i32:
      return 4;
    case Scalar::f16:
    case Scalar::bf16:
      return 2;
    default:
      return 1;
  }
}

__device__ __forceinline__ void move(const void* src, Scalar st, int64_t si, void* dst, Scalar dt,
                                     int64_t di) {
  if (st == dt) {  // the bits as they are (no float register: NaN payloads survive)
    switch (size_of(st)) {
      case 8:
        static_cast<unsigned long long*>(dst)[di] = static_cast<const unsigned long long*>(src)[si];
        return;
      case 4:
        static_cast<unsigned*>(dst)[di] = static_cast<const unsigned*>(src)[si];
        return;
      case 2:
        static_cast<unsigned short*>(dst)[di] = static_cast<const unsigned short*>(src)[si];
        return;
      default:
        static_cast<unsigned char*>(dst)[di] = static_cast<const unsigned char*>(src)[si];
        return;
    }
  }
  if (is_integer(st) && is_integer(dt))
    store_i(dst, dt, di, load_i(src, st, si));
  else
    store_f(dst, dt, di, load_f(src, st, si));
}

// The source and destination offsets of element i (row-major over layout.sizes).
__device__ __forceinline__ void strided_offsets(const CopyLayout& layout, int64_t i, int64_t& so,
                                                int64_t& doff) {
  int64_t rest = i;
  so = 0;
  doff = 0;
  for (int d = layout.dims - 1; d >= 0; --d) {
    const int64_t idx = rest % layout.sizes[d];
    rest /= layout.sizes[d];
    so += idx * layout.src_strides[d];
    doff += idx * layout.dst_strides[d];
  }
}

__global__ void strided_convert_kernel(const void* src, Scalar st, void* dst, Scalar dt,
                                       CopyLayout layout, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t so, doff;
    strided_offsets(layout, i, so, doff);
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

// ---- Typed paths for the floating types: no per-element switch. Each value is loaded into its
// exact wide type (float for f32/f16/bf16, double when either side is f64) and rounded once to
// the destination, which is the double path's result bit for bit: a float/half/bf16 value is
// exact in float, and rounding a float value to half/bf16 (__float2half_rn) is the same one
// round to nearest even as from its double.
template <class S, class D>
struct Wide {
  using type = float;
};
template <class D>
struct Wide<double, D> {
  using type = double;
};
template <class S>
struct Wide<S, double> {
  using type = double;
};
template <>
struct Wide<double, double> {
  using type = double;
};

__device__ __forceinline__ float widen(float v, float) { return v; }
__device__ __forceinline__ float widen(__half v, float) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v, float) { return __bfloat162float(v); }
__device__ __forceinline__ double widen(double v, double) { return v; }
__device__ __forceinline__ double widen(float v, double) { return v; }
__device__ __forceinline__ double widen(__half v, double) { return __half2float(v); }
__device__ __forceinline__ double widen(__nv_bfloat16 v, double) { return __bfloat162float(v); }

__device__ __forceinline__ void narrow_to(float v, float* out) { *out = v; }
__device__ __forceinline__ void narrow_to(float v, __half* out) { *out = __float2half_rn(v); }
__device__ __forceinline__ void narrow_to(float v, __nv_bfloat16* out) {
  *out = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void narrow_to(double v, double* out) { *out = v; }
__device__ __forceinline__ void narrow_to(double v, float* out) { *out = static_cast<float>(v); }
__device__ __forceinline__ void narrow_to(double v, __half* out) { *out = __double2half(v); }
__device__ __forceinline__ void narrow_to(double v, __nv_bfloat16* out) {
  *out = __double2bfloat16(v);
}

template <class S, class D>
__device__ __forceinline__ D cast_one(S v) {
  using W = typename Wide<S, D>::type;
  D out;
  narrow_to(widen(v, W{}), &out);
  return out;
}

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Contiguous cast, V elements per load/store when the host found both pointers aligned to a
// whole pack (V == 1 otherwise); the last n % V elements one by one.
template <class S, class D, int V>
__global__ void cast_contiguous_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t packs = n / V;
  const Pack<S, V>* s = reinterpret_cast<const Pack<S, V>*>(src);
  Pack<D, V>* d = reinterpret_cast<Pack<D, V>*>(dst);
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<S, V> a = s[i];
    Pack<D, V> b;
#pragma unroll
    for (int k = 0; k < V; ++k) b.v[k] = cast_one<S, D>(a.v[k]);
    d[i] = b;
  }
  for (int64_t i = packs * V + first; i < n; i += stride) dst[i] = cast_one<S, D>(src[i]);
}

// Strided / broadcasting cast between two floating types, or a same-type move of raw bits
// (S == D an unsigned type of the element's width).
template <class S, class D>
__global__ void strided_cast_kernel(const S* __restrict__ src, D* __restrict__ dst,
                                    CopyLayout layout, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t so, doff;
    strided_offsets(layout, i, so, doff);
    if constexpr (std::is_same_v<S, D>)
      dst[doff] = src[so];
    else
      dst[doff] = cast_one<S, D>(src[so]);
  }
}

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with the element type of a floating scalar; false for the others.
template <class F>
bool with_float_type(Scalar t, F&& f) {
  switch (t) {
    case Scalar::f64:
      f(Tag<double>{});
      return true;
    case Scalar::f32:
      f(Tag<float>{});
      return true;
    case Scalar::f16:
      f(Tag<__half>{});
      return true;
    case Scalar::bf16:
      f(Tag<__nv_bfloat16>{});
      return true;
    default:
      return false;
  }
}

// Calls f(Tag<U>{}) with the unsigned type of the scalar's width.
template <class F>
void with_bits_type(Scalar t, F&& f) {
  switch (t) {
    case Scalar::f64:
    case Scalar::i64:
      f(Tag<unsigned long long>{});
      return;
    case Scalar::f32:
    case Scalar::i32:
      f(Tag<unsigned>{});
      return;
    case Scalar::f16:
    case Scalar::bf16:
      f(Tag<unsigned short>{});
      return;
    default:
      f(Tag<unsigned char>{});
      return;
  }
}

// Drops size-1 dimensions and merges neighbours that are contiguous with each other in both
// source and destination, so the index arithmetic runs over as few dimensions as possible.
CopyLayout collapse(const CopyLayout& in) {
  CopyLayout out;
  for (int d = 0; d < in.dims; ++d) {
    if (in.sizes[d] == 1) continue;
    if (out.dims > 0) {
      const int last = out.dims - 1;
      if (out.src_strides[last] == in.src_strides[d] * in.sizes[d] &&
          out.dst_strides[last] == in.dst_strides[d] * in.sizes[d]) {
        out.sizes[last] *= in.sizes[d];
        out.src_strides[last] = in.src_strides[d];
        out.dst_strides[last] = in.dst_strides[d];
        continue;
      }
    }
    out.sizes[out.dims] = in.sizes[d];
    out.src_strides[out.dims] = in.src_strides[d];
    out.dst_strides[out.dims] = in.dst_strides[d];
    ++out.dims;
  }
  return out;
}

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

template <class S, class D>
void launch_cast_contiguous(const S* src, D* dst, int64_t n) {
  constexpr int V = 4;
  if (aligned(src, sizeof(S) * V) && aligned(dst, sizeof(D) * V))
    cast_contiguous_kernel<S, D, V>
        <<<grid_for((n + V - 1) / V), 256, 0, current_stream()>>>(src, dst, n);
  else
    cast_contiguous_kernel<S, D, 1><<<grid_for(n), 256, 0, current_stream()>>>(src, dst, n);
}

// The typed paths; false when the pair takes the generic kernel (integers mixed with others).
bool launch_typed(const void* src, Scalar st, void* dst, Scalar dt, const CopyLayout& layout,
                  int64_t numel) {
  const CopyLayout l = collapse(layout);
  const bool contiguous =
      l.dims == 0 || (l.dims == 1 && l.src_strides[0] == 1 && l.dst_strides[0] == 1);
  if (st == dt) {
    if (contiguous) {
      // An error of the copy is the runtime's last error, which check_kernel_launch reports.
      (void)cudaMemcpyAsync(dst, src, static_cast<size_t>(numel) * size_of(st),
                            cudaMemcpyDeviceToDevice, current_stream());
      return true;
    }
    with_bits_type(st, [&](auto tag) {
      using U = typename decltype(tag)::type;
      strided_cast_kernel<U, U><<<grid_for(numel), 256, 0, current_stream()>>>(
          static_cast<const U*>(src), static_cast<U*>(dst), l, numel);
    });
    return true;
  }
  bool done = false;
  with_float_type(st, [&](auto stag) {
    using S = typename decltype(stag)::type;
    done = with_float_type(dt, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      if (contiguous)
        launch_cast_contiguous(static_cast<const S*>(src), static_cast<D*>(dst), numel);
      else
        strided_cast_kernel<S, D><<<grid_for(numel), 256, 0, current_stream()>>>(
            static_cast<const S*>(src), static_cast<D*>(dst), l, numel);
    });
  });
  return done;
}

}  // namespace

void launch_strided_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type,
                            const CopyLayout& layout, int64_t numel) {
  if (numel == 0) return;
  if (launch_typed(src, src_type, dst, dst_type, layout, numel)) {
    check_kernel_launch("strided_convert");
    return;
  }
  strided_convert_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(src, src_type, dst,
                                                                        dst_type, layout, numel);
  check_kernel_launch("strided_convert");
}

void launch_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type, int64_t numel) {
  if (numel == 0) return;
  CopyLayout flat;
  flat.dims = 1;
  flat.sizes[0] = numel;
  flat.src_strides[0] = flat.dst_strides[0] = 1;
  if (launch_typed(src, src_type, dst, dst_type, flat, numel)) {
    check_kernel_launch("convert");
    return;
  }
  convert_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(src, src_type, dst, dst_type,
                                                                numel);
  check_kernel_launch("convert");
}

namespace {
constexpr int kManyTensors = 48;
constexpr int64_t kManyChunk = 4096;  // elements per block
struct ConvertBatch {
  const void* src[kManyTensors];
  void* dst[kManyTensors];
  int64_t n[kManyTensors];
  int64_t first_block[kManyTensors];
  int count;
};

template <class S, class D>
__global__ void convert_many_kernel(ConvertBatch b) {
  int k = 0;
  while (k + 1 < b.count && b.first_block[k + 1] <= static_cast<int64_t>(blockIdx.x)) ++k;
  const auto* src = static_cast<const S*>(b.src[k]);
  auto* dst = static_cast<D*>(b.dst[k]);
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - b.first_block[k]) * kManyChunk;
  const int64_t end = begin + kManyChunk < b.n[k] ? begin + kManyChunk : b.n[k];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) dst[i] = cast_one<S, D>(src[i]);
}
}  // namespace

void launch_convert_many(const void* const* src, Scalar src_type, void* const* dst, Scalar dst_type,
                         const int64_t* numel, int64_t count) {
  const bool batched =
      src_type == Scalar::f32 && (dst_type == Scalar::f16 || dst_type == Scalar::bf16);
  int64_t i = 0;
  while (i < count) {
    if (!batched) {
      launch_convert(src[i], src_type, dst[i], dst_type, numel[i]);
      ++i;
      continue;
    }
    ConvertBatch b{};
    int64_t blocks = 0;
    for (; i < count && b.count < kManyTensors; ++i) {
      if (numel[i] == 0) continue;
      b.src[b.count] = src[i];
      b.dst[b.count] = dst[i];
      b.n[b.count] = numel[i];
      b.first_block[b.count] = blocks;
      blocks += (numel[i] + kManyChunk - 1) / kManyChunk;
      ++b.count;
    }
    if (b.count == 0) continue;
    if (dst_type == Scalar::f16)
      convert_many_kernel<float, __half>
          <<<static_cast<unsigned>(blocks), 256, 0, current_stream()>>>(b);
    else
      convert_many_kernel<float, __nv_bfloat16>
          <<<static_cast<unsigned>(blocks), 256, 0, current_stream()>>>(b);
    check_kernel_launch("convert_many");
  }
}

void launch_fill(void* dst, Scalar type, double value, int64_t numel) {
  if (numel == 0) return;
  fill_kernel<<<grid_for(numel), 256, 0, current_stream()>>>(dst, type, value, numel);
  check_kernel_launch("fill");
}

}  // namespace mantissa::cuda::detail
