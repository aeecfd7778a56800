// 8-bit Adam kernels (adam8bit_kernels.h): one thread block of 256 per quantization block.
#include "core/cuda/launch.h"
#include "kernels/cuda/optim/adam8bit_kernels.h"
#include "kernels/nearest_code.h"

namespace mantissa::cuda::detail {
namespace {

constexpr int kBlock = 256;      // elements per quantization block, threads per thread block
constexpr int kZeroCode1 = 127;  // the signed map's 0 (+0); its negative entries come first

// Rounded alone, never contracted into an FMA: the CPU kernels' arithmetic.
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }

// The maximum of v over the 256 threads (NaN ignored, as std::max from 0 on the CPU).
__device__ float block_max(float v, float* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = sh[0];
#pragma unroll
  for (int w = 1; w < kBlock / 32; ++w) r = fmaxf(r, sh[w]);
  __syncthreads();  // sh is reused by the next call
  return r;
}

__global__ void adam8bit_blocks_kernel(Adam8bitStep s, const float* codes, float* p, const float* g,
                                       uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                                       int64_t n) {
  __shared__ float code1[kBlock], code2[kBlock];
  __shared__ float red[kBlock / 32];
  code1[threadIdx.x] = codes[threadIdx.x];
  code2[threadIdx.x] = codes[kBlock + threadIdx.x];
  __syncthreads();
  for (int64_t b = blockIdx.x; b * kBlock < n; b += gridDim.x) {
    const int64_t i = b * kBlock + threadIdx.x;
    const bool valid = i < n;
    float m = 0.0f, v = 0.0f;
    if (valid) {
      const float gi = g[i];
      m = add(mul(mul(code1[q1[i]], absmax1[b]), s.beta1), mul(s.one_minus_beta1, gi));
      v = add(mul(mul(code2[q2[i]], absmax2[b]), s.beta2), mul(mul(s.one_minus_beta2, gi), gi));
      float pi = add(p[i], mul(s.step_size, __fdiv_rn(m, add(__fsqrt_rn(v), s.eps_scaled))));
      if (s.apply_decay) pi = mul(pi, s.decay);
      p[i] = pi;
    }
    // Every thread has read its old codes and absmaxes before any is written.
    const float a1 = block_max(valid ? fabsf(m) : 0.0f, red);
    const float a2 = block_max(valid ? fabsf(v) : 0.0f, red);
    if (threadIdx.x == 0) {
      absmax1[b] = a1;
      absmax2[b] = a2;
    }
    if (!valid) continue;
    int c1 = kZeroCode1;
    if (a1 != 0.0f) {
      c1 = ::mantissa::kernels::nearest_code_in_map(code1, mul(m, __fdiv_rn(1.0f, a1)));
      // The sign of m decides the side of 0, whatever the nearest entry's.
      if ((c1 < kZeroCode1) != (signbit(m) != 0)) c1 += m > 0.0f ? 1 : -1;
    }
    q1[i] = static_cast<uint8_t>(c1);
    q2[i] = a2 != 0.0f ? static_cast<uint8_t>(::mantissa::kernels::nearest_code_in_map(
                             code2, mul(v, __fdiv_rn(1.0f, a2))))
                       : uint8_t{0};
  }
}

__global__ void adam32_span_kernel(Adam8bitStep s, float* p, const float* g, float* m, float* v,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = add(mul(m[i], s.beta1), mul(s.one_minus_beta1, gi));
    const float vi = add(mul(v[i], s.beta2), mul(mul(s.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    float pi = add(p[i], mul(s.step_size, __fdiv_rn(mi, add(__fsqrt_rn(vi), s.eps_scaled))));
    if (s.apply_decay) pi = mul(pi, s.decay);
    p[i] = pi;
  }
}

}  // namespace

void launch_adam8bit_blocks(const Adam8bitStep& s, const float* codes, float* p, const float* g,
                            uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2, int64_t n) {
  if (n <= 0) return;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  adam8bit_blocks_kernel<<<static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16), kBlock,
                           0, current_stream()>>>(s, codes, p, g, q1, q2, absmax1, absmax2, n);
  check_kernel_launch("adam8bit");
}

void launch_adam32_span(const Adam8bitStep& s, float* p, const float* g, float* m, float* v,
                        int64_t n) {
  if (n <= 0) return;
  adam32_span_kernel<<<grid_for(n), 256, 0, current_stream()>>>(s, p, g, m, v, n);
  check_kernel_launch("adam8bit (float32 state)");
}

}  // namespace mantissa::cuda::detail
