// LLM.int8 front end: dtype handling, the outlier decomposition and the dequantizing epilogue.
#include "mantissa/quant/int8.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/quant/int8_epilogue.h"
#include "kernels/cpu/quant/int8_rowwise.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::quant {
namespace {

namespace kq = kernels::quant;

Tensor as_f32_2d(const Tensor& a, const char* where) {
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), where,
                 "expected a float32, bfloat16 or float16 tensor, got {}", a.dtype().name());
  MANTISSA_CHECK(a.dim() == 2, where, "expected a 2-D tensor, got shape {}", shape_str(a.shape()));
  return a.detach().to(kFloat32).contiguous();
}

constexpr float kInv127 = 1.0f / 127.0f;

}  // namespace

Int8Rows quantize_int8_rows(const Tensor& a, float threshold) {
  const DType dt = a.dtype();
  const bool half = (dt == kBFloat16 || dt == kFloat16) && a.dim() == 2;
  // A half matrix is quantized from its own values, widened a row at a time.
  const Tensor f = half ? a.detach().contiguous() : as_f32_2d(a, "quantize_int8_rows");
  const int64_t rows = f.size(0), cols = f.size(1);
  Int8Rows r;
  r.codes = empty({rows, cols}, kInt8);
  r.absmax = empty({rows}, kFloat32);
  if (half) {
    kq::int8_rowwise_quantize_half(static_cast<const uint16_t*>(f.data_ptr()), dt, rows, cols,
                                   threshold, r.codes.data<int8_t>(), r.absmax.data<float>(),
                                   &r.outlier_cols);
  } else {
    kq::int8_rowwise_quantize(f.data<float>(), rows, cols, threshold, r.codes.data<int8_t>(),
                              r.absmax.data<float>(), &r.outlier_cols);
  }
  return r;
}

QuantizedTensor quantize_int8_weight(const Tensor& weight) {
  Int8Rows r = quantize_int8_rows(weight, 0.0f);
  QuantizedTensor q;
  q.format = FormatId::kInt8Rowwise;
  q.shape = weight.shape();
  q.dtype = weight.dtype();
  q.blocksize = weight.size(1);
  q.data = r.codes;
  q.absmax = r.absmax;
  return q;
}

Tensor dequantize_int8_rows(const Tensor& codes, const Tensor& absmax, DType dtype) {
  MANTISSA_CHECK(codes.dtype() == kInt8 && codes.dim() == 2 && absmax.dtype() == kFloat32 &&
                     absmax.numel() == codes.size(0),
                 "dequantize_int8_rows", "expected int8 [rows, cols] codes and fp32 [rows] absmax");
  const Tensor c = codes.contiguous(), s = absmax.contiguous();
  const int64_t rows = c.size(0), cols = c.size(1);
  if (dtype == kBFloat16 || dtype == kFloat16) {
    Tensor out = empty({rows, cols}, dtype);
    kq::int8_dequantize_rows_to_half(c.data<int8_t>(), s.data<float>(), rows, cols, dtype,
                                     static_cast<uint16_t*>(out.data_ptr()));
    return out;
  }
  Tensor out = empty({rows, cols}, kFloat32);
  kq::int8_dequantize_rows(c.data<int8_t>(), s.data<float>(), rows, cols, out.data<float>());
  return out.to(dtype);
}

Tensor int8_linear_nograd(const Tensor& x, const Tensor& cb, const Tensor& scb, const Tensor& bias,
                          float threshold) {
  constexpr const char* kWhere = "int8_linear";
  MANTISSA_CHECK(cb.dtype() == kInt8 && cb.dim() == 2 && scb.numel() == cb.size(0), kWhere,
                 "expected an int8 [out, in] weight and fp32 [out] scales");
  const int64_t out_f = cb.size(0), in_f = cb.size(1);
  MANTISSA_CHECK(x.dim() >= 1 && x.size(-1) == in_f, kWhere,
                 "input of shape {} does not match weight of shape [{}, {}]", shape_str(x.shape()),
                 out_f, in_f);
  const int64_t rows = numel_of(Shape(x.shape().begin(), x.shape().end() - 1));
  // A bf16/f16 input is quantized from its own values; float32 values are made only for the
  // outlier columns' products, where there are any.
  const bool half = x.dtype() == kBFloat16 || x.dtype() == kFloat16;
  const Tensor x2 = half ? x.detach().reshape({rows, in_f}).contiguous()
                         : as_f32_2d(x.detach().reshape({rows, in_f}), kWhere);
  const Int8Rows qa = quantize_int8_rows(x2, threshold);
  const Tensor cbc = cb.contiguous(), scbc = scb.contiguous().to(kFloat32);
  // Outlier columns: x[:, cols] @ (CB[:, cols] * SCB / 127)^T in fp32, the weights gathered
  // transposed ([cols, out_f]) so that each row's products run along the output.
  const auto& cols = qa.outlier_cols;
  const int64_t ncols = static_cast<int64_t>(cols.size());
  Tensor add;
  if (ncols > 0) {
    std::vector<float> w_cols(static_cast<size_t>(ncols * out_f));
    const int8_t* w = cbc.data<int8_t>();
    const float* sb = scbc.data<float>();
    for (int64_t c = 0; c < ncols; ++c)
      for (int64_t j = 0; j < out_f; ++j)
        w_cols[c * out_f + j] = static_cast<float>(w[j * in_f + cols[c]]) * (sb[j] * kInv127);
    add = empty({rows, out_f}, kFloat32);
    const Tensor x32 = half ? x2.to(kFloat32) : x2;
    kq::int8_outlier_products(x32.data<float>(), in_f, cols.data(), ncols, w_cols.data(), rows,
                              out_f, add.data<float>());
  }
  gemm::Epilogue e;
  e.addend = add;
  e.bias = bias.defined() ? bias.detach() : Tensor();
  // A half input's output is rounded once from the fp32 epilogue inside the product.
  if (x.dtype() == kBFloat16 || x.dtype() == kFloat16) e.out_dtype = x.dtype();
  const Tensor y =
      gemm::gemm(gemm::int8_rows(qa.codes, qa.absmax), gemm::int8_rows(cbc, scbc).t(), e);
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  return y.to(x.dtype()).view(out_shape);
}

}  // namespace mantissa::quant
