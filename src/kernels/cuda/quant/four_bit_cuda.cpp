// bitsandbytes' 4-bit weights decoded on a GPU (four_bit_cuda.h).
#include "kernels/cuda/quant/four_bit_cuda.h"

#if MANTISSA_HAS_CUDA
#include <algorithm>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/quant/four_bit_kernels.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::gpu {

Tensor nested_absmax(const QuantizedTensor& q) {
  const Tensor codes = q.absmax.detach().contiguous();
  const Tensor scales = q.nested.absmax.detach().contiguous();
  MANTISSA_CHECK(q.has_nested && codes.is_cuda() && scales.device() == codes.device() &&
                     codes.dtype() == kUInt8 && scales.dtype() == kFloat32,
                 "block_absmax",
                 "internal: expected double-quantized uint8 codes and float32 scales on one GPU, "
                 "got {} on {} and {} on {}",
                 codes.dtype().name(), codes.device().str(), scales.dtype().name(),
                 scales.device().str());
  const Tensor map = q.nested.code.detach().to(kCPU).to(kFloat32).contiguous();
  MANTISSA_CHECK(map.numel() == 256, "block_absmax", "the nested code map has {} entries, not 256",
                 map.numel());
  cuda::detail::DynamicMap m;
  std::copy_n(map.data<float>(), 256, m.v);
  cuda::detail::DeviceGuard guard(codes.device());
  Tensor out = empty({codes.numel()}, kFloat32, codes.device());
  cuda::detail::launch_nested_absmax(codes.device_data<uint8_t>(), codes.numel(),
                                     q.nested.blocksize, m, scales.device_data<float>(),
                                     q.nested.offset, out.device_data<float>());
  return out;
}

Tensor dequantize_4bit(const QuantizedTensor& q, FormatId format, const Tensor& absmax,
                       DType dtype) {
  const Tensor packed = q.data.detach().contiguous();
  const Tensor scales = absmax.detach().contiguous();
  MANTISSA_CHECK(packed.is_cuda() && scales.device() == packed.device(), "dequantize",
                 "the packed codes ({}) and the block absmax ({}) must be on one GPU",
                 packed.device().str(), scales.device().str());
  cuda::detail::FourBitTable table;
  std::copy_n(kernels::quant::four_bit_codebook(format).dequant_values.data(), 16, table.v);
  cuda::detail::DeviceGuard guard(packed.device());
  Tensor out = empty(q.shape, dtype, packed.device());
  cuda::detail::launch_dequantize_4bit(packed.device_data<uint8_t>(), scales.device_data<float>(),
                                       q.numel(), q.blocksize, table, out.device_ptr(),
                                       detail::cuda_scalar_of(dtype, "dequantize"));
  return out;
}

}  // namespace mantissa::kernels::gpu

#endif
