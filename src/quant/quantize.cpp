// 4-bit quantization front end: argument checks, dtype handling and the double quantization of
// the absmax; the per-element work is in kernels/cpu/quant (and kernels/cuda/quant, which
// decodes codes that live on a GPU).
#include "mantissa/quant/quantize.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "kernels/cpu/quant/four_bit.h"
#include "mantissa/core/convert.h"
#include "mantissa/formats/format_table.h"
#include "quant/torch_float_sum.h"
#if MANTISSA_HAS_CUDA
#include "kernels/cuda/quant/four_bit_cuda.h"
#endif

namespace mantissa::quant {
namespace {

namespace kq = kernels::quant;

// f, checked to be a 4-bit format of this family: its row has 4-bit elements under fp32 block
// absmax (the MX and NVFP4 rows, with byte scales, are not).
FormatId four_bit_format(FormatId f, const char* where) {
  MANTISSA_CHECK(formats::has_layout(f, 4, formats::ScaleFormat::kFp32PerBlock), where,
                 "format {} is not a 4-bit format (use nf4 or fp4)", formats::format_name(f));
  return f;
}

void check_options(const FourBitOptions& o, const char* where) {
  four_bit_format(o.format, where);
  const int64_t b = o.blocksize;
  MANTISSA_CHECK(b >= 32 && b <= 4096 && (b & (b - 1)) == 0, where,
                 "blocksize must be one of 32, 64, 128, 256, 512, 1024, 2048, 4096, got {}", b);
}

Tensor code_table(FormatId f) {
  const auto& v = kq::four_bit_codebook(four_bit_format(f, "quantize_4bit")).values;
  return from_buffer(v.data(), kFloat32, {16});
}

// Chunk of whole blocks that keeps the fp32 staging buffer near 1 MiB.
int64_t chunk_elements(int64_t blocksize) {
  return std::max<int64_t>(1, (int64_t{1} << 18) / blocksize) * blocksize;
}

QuantizedTensor empty_four_bit(const Shape& shape, DType dtype, const FourBitOptions& o) {
  QuantizedTensor q;
  q.format = o.format;
  q.shape = shape;
  q.dtype = dtype;
  q.blocksize = o.blocksize;
  const int64_t n = numel_of(shape);
  q.data = empty({(n + 1) / 2, 1}, kUInt8);
  q.absmax = empty({(n + o.blocksize - 1) / o.blocksize}, kFloat32);
  q.code = code_table(o.format);
  return q;
}

void finish_double_quant(QuantizedTensor& q) {
  Tensor codes;
  q.nested = double_quantize_absmax(q.absmax.data<float>(), q.absmax.numel(), codes);
  q.absmax = codes;
  q.has_nested = true;
}

}  // namespace

NestedAbsmax double_quantize_absmax(const float* absmax, int64_t n, Tensor& codes_out) {
  NestedAbsmax nested;
  nested.blocksize = 256;
  nested.offset = n ? detail::torch_mean_f32(absmax, n) : 0.0f;
  std::vector<float> centred(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) centred[i] = absmax[i] - nested.offset;
  codes_out = empty({n}, kUInt8);
  nested.absmax = empty({(n + 255) / 256}, kFloat32);
  kq::quantize_blockwise(centred.data(), n, 256, kq::dynamic_map_signed(),
                         codes_out.data<uint8_t>(), nested.absmax.data<float>());
  nested.code = from_buffer(kq::dynamic_map_signed(), kFloat32, {kq::kDynamicMapSize});
  return nested;
}

QuantizedTensor quantize_4bit_generated(const Shape& shape, DType dtype,
                                        const FourBitOptions& options,
                                        const std::function<void(float*, int64_t, int64_t)>& fill) {
  constexpr const char* kWhere = "quantize_4bit";
  check_options(options, kWhere);
  QuantizedTensor q = empty_four_bit(shape, dtype, options);
  const int64_t n = q.numel();
  const int64_t chunk = chunk_elements(options.blocksize);
  std::vector<float> buf(static_cast<size_t>(std::min(n, chunk)));
  const FormatId format = four_bit_format(options.format, kWhere);
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t count = std::min(chunk, n - first);
    fill(buf.data(), first, count);
    kq::quantize_4bit(buf.data(), first, count, n, options.blocksize, format,
                      q.data.data<uint8_t>(), q.absmax.data<float>());
  }
  if (options.double_quant) finish_double_quant(q);
  return q;
}

QuantizedTensor quantize_4bit(const Tensor& values, const FourBitOptions& options) {
  constexpr const char* kWhere = "quantize_4bit";
  const DType dt = values.dtype();
  MANTISSA_CHECK(dt == kFloat32 || dt == kBFloat16 || dt == kFloat16, kWhere,
                 "4-bit quantization takes float32, bfloat16 or float16 values, got {}", dt.name());
  if (values.is_cuda()) {
    // Quantized by the host's (reference) quantizer; the codes and scales go back to the GPU,
    // the code tables stay in host memory, as a quantized layer moved there keeps them.
    QuantizedTensor q = quantize_4bit(values.detach().to(kCPU), options);
    q.data = q.data.to(values.device());
    q.absmax = q.absmax.to(values.device());
    if (q.has_nested) q.nested.absmax = q.nested.absmax.to(values.device());
    return q;
  }
  const Tensor src = values.detach().contiguous();
  const char* base = static_cast<const char*>(src.data_ptr());
  const size_t item = dt.itemsize();
  return quantize_4bit_generated(src.shape(), dt, options,
                                 [&](float* out, int64_t first, int64_t count) {
                                   convert_buffer(base + first * item, dt, out, kFloat32, count);
                                 });
}

Tensor block_absmax(const QuantizedTensor& q) {
  if (!q.has_nested) return q.absmax;
#if MANTISSA_HAS_CUDA
  if (q.absmax.is_cuda()) return kernels::gpu::nested_absmax(q);
#endif
  const int64_t n = q.absmax.numel();
  Tensor out = empty({n}, kFloat32);
  float* o = out.data<float>();
  kq::dequantize_blockwise(q.absmax.data<uint8_t>(), n, q.nested.blocksize,
                           q.nested.code.data<float>(), q.nested.absmax.data<float>(), o);
  const float offset = q.nested.offset;
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (int64_t i = 0; i < n; ++i) o[i] += offset;  // a separate fp32 add, as torch
  return out;
}

void dequantize_range(const QuantizedTensor& q, const float* absmax, int64_t first, int64_t count,
                      DType dtype, void* out) {
  constexpr const char* kWhere = "dequantize";
  const FormatId format = four_bit_format(q.format, kWhere);
  const uint8_t* packed = q.data.data<uint8_t>();
  if (dtype == kFloat32) {
    kq::dequantize_4bit(packed, absmax, first, count, q.blocksize, format,
                        static_cast<float*>(out));
    return;
  }
  MANTISSA_CHECK(dtype == kBFloat16 || dtype == kFloat16, kWhere,
                 "dequantize to float32, bfloat16 or float16, got {}", dtype.name());
  kq::dequantize_4bit_16(packed, absmax, first, count, q.blocksize, format, dtype == kBFloat16,
                         static_cast<uint16_t*>(out));
}

Tensor dequantize(const QuantizedTensor& q, DType dtype) {
  MANTISSA_CHECK(q.defined(), "dequantize", "the quantized tensor is empty");
  return dequantize(q, dtype, block_absmax(q));
}

Tensor dequantize(const QuantizedTensor& q, DType dtype, const Tensor& am) {
  MANTISSA_CHECK(q.defined(), "dequantize", "the quantized tensor is empty");
  MANTISSA_CHECK(
      am.dtype() == kFloat32 && am.numel() == (q.numel() + q.blocksize - 1) / q.blocksize,
      "dequantize", "expected the quantized tensor's {} float32 block absmax values",
      (q.numel() + q.blocksize - 1) / q.blocksize);
  if (q.data.is_cuda()) {
    MANTISSA_CHECK(dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat16, "dequantize",
                   "dequantize to float32, bfloat16 or float16, got {}", dtype.name());
#if MANTISSA_HAS_CUDA
    return kernels::gpu::dequantize_4bit(q, four_bit_format(q.format, "dequantize"),
                                         am.to(q.data.device()), dtype);
#endif
  }
  Tensor out = empty(q.shape, dtype);
  const int64_t n = q.numel();
  const float* a = am.data<float>();
  char* o = static_cast<char*>(out.data_ptr());
  const size_t item = dtype.itemsize();
  // One equal piece per thread (a multiple of the block, so pieces start on whole blocks):
  // fixed 64K-element chunks would leave one thread a chunk more than the other on 2 threads.
  constexpr int64_t kSerialBelow = int64_t{1} << 18;
  const int64_t parts = n >= kSerialBelow ? std::max(1, omp_get_max_threads()) : 1;
  const int64_t align = std::max<int64_t>(q.blocksize, 2);
  const int64_t piece = ((n + parts - 1) / parts + align - 1) / align * align;
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t first = p * piece;
    if (first < n)
      dequantize_range(q, a, first, std::min(piece, n - first), dtype, o + first * item);
  }
  return out;
}

}  // namespace mantissa::quant
