// FP8 cast kernels (fp8_kernels.h). The encoder is the CPU's (core/fp8_encode.h, integer-only
// rounding), so a GPU gives the CPU's codes whatever its FTZ setting or conversion instructions.
#include "core/fp8_encode.h"
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/fp8/fp8_kernels.h"

#include <algorithm>

namespace mantissa::cuda::detail {
namespace {

__device__ __forceinline__ float decode_e4m3(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu, mant = b & 0x7u;
  if (exp == 0xf && mant == 0x7) return __uint_as_float(sign | 0x7fc00000u);
  if (exp != 0) return __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));
  const float mag = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9, exact
  return sign ? -mag : mag;
}

// E5M2 is the high byte of a float16 pattern.
__device__ __forceinline__ float decode_e5m2(uint8_t b) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(b << 8)));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ unsigned warp_sum(unsigned v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

constexpr int kCastThreads = 256;
// Enough blocks to fill any GPU several times over; each thread then loops over a few elements.
constexpr int64_t kCastMaxBlocks = 2048;

// One thread's share of a cast's statistics.
struct CastAcc {
  float amax = 0.0f;
  unsigned saturated = 0, flushed = 0;
};

// The code of x (one element), with its statistics.
template <bool kE5M2>
__device__ __forceinline__ uint8_t cast_one(float x, float scale, CastAcc& acc) {
  constexpr float kMax = kE5M2 ? 57344.0f : 448.0f;
  const float ax = fabsf(x);
  acc.amax = ax > acc.amax ? ax : acc.amax;  // NaN never wins
  const float y = __fmul_rn(x, scale);
  const uint32_t bits = __float_as_uint(y);
  const uint8_t code =
      kE5M2 ? fp8_encode::e5m2_bits(bits, true) : fp8_encode::e4m3_bits(bits, true);
  acc.saturated += fabsf(y) > kMax ? 1u : 0u;
  acc.flushed += (x != 0.0f && (code & 0x7fu) == 0) ? 1u : 0u;
  return code;
}

// Adds the block's statistics to the counters, once per block: the warps combine in shared
// memory first. (An atomic from every warp of a large tensor on one address serialised the
// cast: 0.3 ms for 12.6 M elements on an H100, against 0.01 ms of memory traffic.) Every thread
// of the block (kCastThreads of them) must call it.
__device__ __forceinline__ void add_block_stats(CastAcc acc, Fp8CastCounters* counters) {
  constexpr int kWarps = kCastThreads / 32;
  acc.amax = warp_max(acc.amax);
  acc.saturated = warp_sum(acc.saturated);
  acc.flushed = warp_sum(acc.flushed);
  __shared__ float s_amax[kWarps];
  __shared__ unsigned s_sat[kWarps], s_flush[kWarps];
  const int warp = threadIdx.x / 32 + threadIdx.y * (blockDim.x / 32), lane = threadIdx.x % 32;
  if (lane == 0) {
    s_amax[warp] = acc.amax;
    s_sat[warp] = acc.saturated;
    s_flush[warp] = acc.flushed;
  }
  __syncthreads();
  if (warp != 0) return;
  float amax = lane < kWarps ? s_amax[lane] : 0.0f;
  unsigned saturated = lane < kWarps ? s_sat[lane] : 0u;
  unsigned flushed = lane < kWarps ? s_flush[lane] : 0u;
  amax = warp_max(amax);
  saturated = warp_sum(saturated);
  flushed = warp_sum(flushed);
  if (lane == 0) {
    if (amax > 0.0f) atomicMax(&counters->amax_bits, __float_as_uint(amax));
    if (saturated) atomicAdd(&counters->saturated, static_cast<unsigned long long>(saturated));
    if (flushed) atomicAdd(&counters->flushed, static_cast<unsigned long long>(flushed));
  }
}

template <Scalar S, bool kE5M2>
__global__ void __launch_bounds__(kCastThreads)
    scaled_cast_kernel(const elem_t<S>* src, uint8_t* dst, int64_t n, float scale,
                       Fp8CastCounters* counters) {
  CastAcc acc;
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = cast_one<kE5M2>(static_cast<float>(load<S>(src, i)), scale, acc);
  add_block_stats(acc, counters);  // full warps: a lane past n adds zeros
}

// The cast of a (rows, cols) matrix that also writes its transpose dst_t (cols, rows), as
// TransformerEngine's cast-transpose: a 64 x 64 tile per block of 32 x 8 threads goes through
// shared memory, so the source is read once and both outputs are written coalesced.
constexpr int kCtTile = 64;

template <Scalar S, bool kE5M2>
__global__ void __launch_bounds__(kCastThreads)
    cast_transpose_kernel(const elem_t<S>* src, uint8_t* dst, uint8_t* dst_t, int64_t rows,
                          int64_t cols, float scale, Fp8CastCounters* counters) {
  __shared__ uint8_t tile[kCtTile][kCtTile + 4];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kCtTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCtTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  CastAcc acc;
  for (int k = ty; k < kCtTile; k += 8) {
    for (int j = tx; j < kCtTile; j += 32) {
      const int64_t r = r0 + k, c = c0 + j;
      if (r < rows && c < cols) {
        const uint8_t code =
            cast_one<kE5M2>(static_cast<float>(load<S>(src, r * cols + c)), scale, acc);
        dst[r * cols + c] = code;
        tile[k][j] = code;
      }
    }
  }
  __syncthreads();
  for (int k = ty; k < kCtTile; k += 8) {
    for (int j = tx; j < kCtTile; j += 32) {
      const int64_t c = c0 + k, r = r0 + j;  // dst_t row c, column r
      if (c < cols && r < rows) dst_t[c * rows + r] = tile[j][k];
    }
  }
  add_block_stats(acc, counters);
}

template <Scalar D, bool kE5M2>
__global__ void dequantize_kernel(const uint8_t* src, elem_t<D>* dst, int64_t n, float scale_inv) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = kE5M2 ? decode_e5m2(src[i]) : decode_e4m3(src[i]);
    store<D>(dst, i, __fmul_rn(v, scale_inv));
  }
}

constexpr int kTile = 32;

// One 32 x 32 tile per block of 32 x 8 threads, through shared memory so that both the reads
// and the writes are coalesced.
__global__ void transpose_bytes_kernel(const uint8_t* src, uint8_t* dst, int64_t rows,
                                       int64_t cols) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
    const int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
    const int64_t c = c0 + k, r = r0 + threadIdx.x;  // dst row c, column r
    if (c < cols && r < rows) dst[c * rows + r] = tile[threadIdx.x][k];
  }
}

// cast_transpose_kernel with four consecutive columns per thread: 8- or 16-byte loads, 4-byte
// stores of codes to both outputs. For rows and cols multiples of 4 and aligned pointers.
template <Scalar S>
__device__ __forceinline__ void load4(const elem_t<S>* p, float out[4]) {
  if constexpr (S == Scalar::f32) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    elem_t<S> e[4];
    memcpy(e, &v, sizeof(v));
    for (int i = 0; i < 4; ++i) out[i] = static_cast<float>(load<S>(e, i));
  }
}

template <Scalar S, bool kE5M2>
__global__ void __launch_bounds__(kCastThreads)
    cast_transpose4_kernel(const elem_t<S>* src, uint8_t* dst, uint8_t* dst_t, int64_t rows,
                           int64_t cols, float scale, Fp8CastCounters* counters) {
  __shared__ uint32_t tile[kCtTile][kCtTile / 4 + 1];  // tile[r][c / 4]: 4 codes per word
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kCtTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCtTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // 16 x 16 threads
  CastAcc acc;
  const int64_t c = c0 + 4 * tx;
  for (int k = ty; k < kCtTile; k += 16) {
    const int64_t r = r0 + k;
    if (r < rows && c < cols) {
      float v[4];
      load4<S>(src + r * cols + c, v);
      uint32_t word = 0;
      for (int i = 0; i < 4; ++i) word |= uint32_t{cast_one<kE5M2>(v[i], scale, acc)} << (8 * i);
      *reinterpret_cast<uint32_t*>(dst + r * cols + c) = word;
      tile[k][tx] = word;
    }
  }
  __syncthreads();
  // dst_t row c0 + j holds column j of the tile: 4 rows' codes per word.
  const int64_t r = r0 + 4 * tx;
  for (int j = ty; j < kCtTile; j += 16) {
    const int64_t ct = c0 + j;
    if (ct < cols && r < rows) {
      uint32_t word = 0;
      for (int i = 0; i < 4; ++i)
        word |= ((tile[4 * tx + i][j / 4] >> (8 * (j % 4))) & 0xffu) << (8 * i);
      *reinterpret_cast<uint32_t*>(dst_t + ct * rows + r) = word;
    }
  }
  add_block_stats(acc, counters);
}

bool aligned_to(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <Scalar S>
void cast_as(const void* src, uint8_t* dst, uint8_t* dst_t, int64_t rows, int64_t cols, float scale,
             bool e5m2, Fp8CastCounters* counters) {
  const auto* s = static_cast<const elem_t<S>*>(src);
  const int64_t n = rows * cols;
  if (dst_t != nullptr) {
    const dim3 grid(static_cast<unsigned>((cols + kCtTile - 1) / kCtTile),
                    static_cast<unsigned>((rows + kCtTile - 1) / kCtTile));
    if (rows % 4 == 0 && cols % 4 == 0 && aligned_to(src, 4 * sizeof(elem_t<S>)) &&
        aligned_to(dst, 4) && aligned_to(dst_t, 4)) {
      if (e5m2)
        cast_transpose4_kernel<S, true><<<grid, kCastThreads, 0, current_stream()>>>(
            s, dst, dst_t, rows, cols, scale, counters);
      else
        cast_transpose4_kernel<S, false><<<grid, kCastThreads, 0, current_stream()>>>(
            s, dst, dst_t, rows, cols, scale, counters);
      return;
    }
    const dim3 block(32, kCastThreads / 32);
    if (e5m2)
      cast_transpose_kernel<S, true>
          <<<grid, block, 0, current_stream()>>>(s, dst, dst_t, rows, cols, scale, counters);
    else
      cast_transpose_kernel<S, false>
          <<<grid, block, 0, current_stream()>>>(s, dst, dst_t, rows, cols, scale, counters);
    return;
  }
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(kCastMaxBlocks, (n + kCastThreads - 1) / kCastThreads));
  if (e5m2)
    scaled_cast_kernel<S, true>
        <<<blocks, kCastThreads, 0, current_stream()>>>(s, dst, n, scale, counters);
  else
    scaled_cast_kernel<S, false>
        <<<blocks, kCastThreads, 0, current_stream()>>>(s, dst, n, scale, counters);
}

template <Scalar D>
void dequantize_as(const uint8_t* src, bool e5m2, void* dst, int64_t n, float scale_inv) {
  auto* d = static_cast<elem_t<D>*>(dst);
  if (e5m2)
    dequantize_kernel<D, true><<<grid_for(n), 256, 0, current_stream()>>>(src, d, n, scale_inv);
  else
    dequantize_kernel<D, false><<<grid_for(n), 256, 0, current_stream()>>>(src, d, n, scale_inv);
}

}  // namespace

bool launch_fp8_scaled_cast(const void* src, Scalar src_type, uint8_t* dst, uint8_t* dst_t,
                            int64_t rows, int64_t cols, float scale, bool e5m2,
                            Fp8CastCounters* counters) {
  if (src_type != Scalar::f32 && src_type != Scalar::f16 && src_type != Scalar::bf16) return false;
  if (rows == 0 || cols == 0) return true;
  if (src_type == Scalar::f32)
    cast_as<Scalar::f32>(src, dst, dst_t, rows, cols, scale, e5m2, counters);
  if (src_type == Scalar::f16)
    cast_as<Scalar::f16>(src, dst, dst_t, rows, cols, scale, e5m2, counters);
  if (src_type == Scalar::bf16)
    cast_as<Scalar::bf16>(src, dst, dst_t, rows, cols, scale, e5m2, counters);
  check_kernel_launch("fp8_scaled_cast");
  return true;
}

bool launch_fp8_dequantize(const uint8_t* src, bool e5m2, void* dst, Scalar dst_type, int64_t n,
                           float scale_inv) {
  if (dst_type != Scalar::f32 && dst_type != Scalar::f16 && dst_type != Scalar::bf16) return false;
  if (n == 0) return true;
  if (dst_type == Scalar::f32) dequantize_as<Scalar::f32>(src, e5m2, dst, n, scale_inv);
  if (dst_type == Scalar::f16) dequantize_as<Scalar::f16>(src, e5m2, dst, n, scale_inv);
  if (dst_type == Scalar::bf16) dequantize_as<Scalar::bf16>(src, e5m2, dst, n, scale_inv);
  check_kernel_launch("fp8_dequantize");
  return true;
}

void launch_transpose_bytes(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose_bytes_kernel<<<grid, dim3(kTile, 8), 0, current_stream()>>>(src, dst, rows, cols);
  check_kernel_launch("fp8_transpose");
}

}  // namespace mantissa::cuda::detail
