// Decoding bitsandbytes' 4-bit weights on a GPU (four_bit_kernels.h). Each thread decodes one
// byte (two elements); the products and the offset add use the _rn intrinsics, which nvcc never
// contracts into a fused multiply-add, so the results are the CPU's bit for bit.
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/quant/four_bit_kernels.h"

namespace mantissa::cuda::detail {
namespace {

template <Scalar S>
__global__ void dequantize_4bit_kernel(const uint8_t* packed, const float* absmax, int64_t n,
                                       int64_t blocksize, FourBitTable table, elem_t<S>* out) {
  const int64_t bytes = (n + 1) / 2;
  for (int64_t i = global_thread(); i < bytes; i += grid_threads()) {
    const uint8_t byte = packed[i];
    const int64_t k = 2 * i;
    store<S>(out, k, __fmul_rn(table.v[byte >> 4], absmax[k / blocksize]));
    if (k + 1 < n)
      store<S>(out, k + 1, __fmul_rn(table.v[byte & 0xF], absmax[(k + 1) / blocksize]));
  }
}

__global__ void nested_absmax_kernel(const uint8_t* codes, int64_t n, int64_t blocksize2,
                                     DynamicMap map, const float* absmax2, float offset,
                                     float* out) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    out[i] = __fadd_rn(__fmul_rn(map.v[codes[i]], absmax2[i / blocksize2]), offset);
}

}  // namespace

void launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n,
                            int64_t blocksize, const FourBitTable& table, void* out,
                            Scalar out_type) {
  if (n <= 0) return;
  const int64_t bytes = (n + 1) / 2;
  switch (out_type) {
    case Scalar::f32:
      dequantize_4bit_kernel<Scalar::f32><<<grid_for(bytes), 256, 0, current_stream()>>>(
          packed, absmax, n, blocksize, table, static_cast<float*>(out));
      break;
    case Scalar::bf16:
      dequantize_4bit_kernel<Scalar::bf16><<<grid_for(bytes), 256, 0, current_stream()>>>(
          packed, absmax, n, blocksize, table, static_cast<elem_t<Scalar::bf16>*>(out));
      break;
    default:
      dequantize_4bit_kernel<Scalar::f16><<<grid_for(bytes), 256, 0, current_stream()>>>(
          packed, absmax, n, blocksize, table, static_cast<elem_t<Scalar::f16>*>(out));
      break;
  }
  check_kernel_launch("dequantize_4bit");
}

void launch_nested_absmax(const uint8_t* codes, int64_t n, int64_t blocksize2,
                          const DynamicMap& map, const float* absmax2, float offset, float* out) {
  if (n <= 0) return;
  nested_absmax_kernel<<<grid_for(n), 256, 0, current_stream()>>>(codes, n, blocksize2, map,
                                                                  absmax2, offset, out);
  check_kernel_launch("nested_absmax");
}

}  // namespace mantissa::cuda::detail
