#include "mantissa/fp8/block_scaling.h"

#include <algorithm>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::fp8 {
namespace {

namespace kf = kernels::fp8;

Tensor source_of(const Tensor& x) {
  MANTISSA_CHECK(x.defined() && !x.is_cuda(), "fp8 block scaling",
                 "the block recipe casts CPU tensors only{}",
                 x.defined() ? "; got a tensor on " + x.device().str() : std::string());
  MANTISSA_CHECK(x.dim() == 2, "fp8 block scaling", "expected a 2-D tensor, got {}",
                 shape_str(x.shape()));
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "fp8 block scaling", "expected float32, bfloat16 or float16, got {}",
                 x.dtype().name());
  return x.detach().contiguous();
}

BlockFp8 quantize(const Tensor& x, FormatId format, bool power_2, float epsilon) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  const bool tiles = format == FormatId::kE4m3Block1x128;
  BlockFp8 q;
  q.format = format;
  q.codes = empty({rows, cols}, kFloat8_e4m3fn);
  q.scale_inv = empty({tiles ? rows : kf::block_count(rows), kf::block_count(cols)}, kFloat32);
  auto* codes = static_cast<uint8_t*>(q.codes.data_ptr());
  float* inv = q.scale_inv.data<float>();
  const kf::BlockCastStats st =
      tiles ? kf::quantize_1x128(src.data_ptr(), src.dtype(), rows, cols, cols, codes, inv,
                                 kFloat8_e4m3fn, power_2, epsilon)
            : kf::quantize_128x128(src.data_ptr(), src.dtype(), rows, cols, cols, codes, inv,
                                   kFloat8_e4m3fn, power_2, epsilon);
  q.amax = st.amax;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
}

}  // namespace

BlockFp8 quantize_1x128(const Tensor& x, bool power_2, float epsilon) {
  return quantize(x, FormatId::kE4m3Block1x128, power_2, epsilon);
}

BlockFp8 quantize_128x128(const Tensor& x, bool power_2, float epsilon) {
  return quantize(x, FormatId::kE4m3Block128x128, power_2, epsilon);
}

BlockFp8 quantize_128x1(const Tensor& x, bool power_2, float epsilon) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  BlockFp8 q;
  q.format = FormatId::kE4m3Block1x128;
  q.layout = BlockFp8Layout::kColumns;
  q.codes = empty({rows, cols}, kFloat8_e4m3fn);
  q.scale_inv = empty({kf::block_count(rows), cols}, kFloat32);
  const kf::BlockCastStats st = kf::quantize_128x1(
      src.data_ptr(), src.dtype(), rows, cols, cols, static_cast<uint8_t*>(q.codes.data_ptr()),
      q.scale_inv.data<float>(), kFloat8_e4m3fn, power_2, epsilon);
  q.amax = st.amax;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
}

float block_scale_of(float amax, DType src_dtype, bool power_2, float epsilon) {
  return kf::block_scale(amax, 448.0f, kf::largest_finite(src_dtype), power_2, epsilon);
}

Tensor dequantize(const BlockFp8& q) {
  const int64_t rows = q.codes.size(0), cols = q.codes.size(1);
  Tensor out = empty({rows, cols}, kFloat32);
  const auto* codes = static_cast<const uint8_t*>(q.codes.data_ptr());
  const float* inv = q.scale_inv.data<float>();
  float* o = out.data<float>();
  if (q.layout == BlockFp8Layout::kColumns) {
    for (int64_t r = 0; r < rows; ++r) {
      kf::dequantize(codes + r * cols, kFloat8_e4m3fn, o + r * cols, kFloat32, cols, 1.0f);
      const float* s = inv + r / kf::kBlockLen * cols;
      for (int64_t c = 0; c < cols; ++c) o[r * cols + c] *= s[c];
    }
    return out;
  }
  const bool tiles = q.format == FormatId::kE4m3Block1x128;
  const int64_t scale_cols = q.scale_inv.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < scale_cols; ++t) {
      const int64_t c0 = t * kf::kBlockLen, len = std::min(kf::kBlockLen, cols - c0);
      const float s = inv[(tiles ? r : r / kf::kBlockLen) * scale_cols + t];
      kf::dequantize(codes + r * cols + c0, kFloat8_e4m3fn, o + r * cols + c0, kFloat32, len, s);
    }
  }
  return out;
}

namespace {

// The operand of q's matrix: a 128x1 cast is the 1x128 operand of its transpose, read through
// transposed views of its codes and scales, transposed back.
gemm::Operand operand_of(const BlockFp8& q) {
  if (q.layout == BlockFp8Layout::kColumns)
    return gemm::fp8_blocks(q.format, q.codes.t(), q.scale_inv.t()).t();
  return gemm::fp8_blocks(q.format, q.codes, q.scale_inv);
}

}  // namespace

Tensor block_gemm(const BlockFp8& a, bool transpose_a, const BlockFp8& b, bool transpose_b,
                  const Tensor& bias, DType out_dtype) {
  gemm::Operand ao = operand_of(a);
  gemm::Operand bo = operand_of(b);
  if (transpose_a) ao = ao.t();
  if (transpose_b) bo = bo.t();
  gemm::Epilogue e;
  e.bias = bias;
  e.out_dtype = out_dtype;
  return gemm::gemm(ao, bo, e);
}

}  // namespace mantissa::fp8
