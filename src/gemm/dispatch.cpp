// The GEMM dispatcher (mantissa/gemm/gemm.h): checks the operands, then chooses the engine of
// every product. The engines run what they are given (dense_products, four_bit_products,
// fp8_products, int8_products); every choice between cuBLAS, oneDNN, AMX, the native kernels
// and the float64 kernel is made in this file, from the CPU's features, MANTISSA_GEMM
// (kernels/cpu/gemm/gemm_backend.h) and the shapes.
#include "mantissa/gemm/gemm.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "core/inplace.h"
#include "gemm/block_format_products.h"
#include "gemm/dense_products.h"
#include "gemm/four_bit_gemv_product.h"
#include "gemm/four_bit_products.h"
#include "gemm/fp8_block_products.h"
#include "gemm/fp8_products.h"
#include "gemm/int8_products.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "kernels/cuda/gemm/cuda_gemm.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa::gemm {
namespace {

namespace d = detail;
using kernels::GemmBackend;

constexpr const char* kWhere = "gemm";

std::atomic<Float32Products> g_float32{Float32Products::kExact};

// The operand kinds the engines take, read from the format table: any row with that layout
// goes to that engine, so a new row of a known layout needs nothing here.
bool has_layout(const std::optional<FormatId>& f, int bits, formats::ScaleFormat scale) {
  return f && formats::has_layout(*f, bits, scale);
}
bool is_fp8(const Operand& o) {
  return has_layout(o.format, 8, formats::ScaleFormat::kFp32PerTensor);
}
bool is_four_bit(const Operand& o) {
  return has_layout(o.format, 4, formats::ScaleFormat::kFp32PerBlock);
}
bool is_int8(const Operand& o) {
  return has_layout(o.format, 8, formats::ScaleFormat::kFp32PerRow);
}
bool is_fp8_tiles(const Operand& o) {
  return has_layout(o.format, 8, formats::ScaleFormat::kFp32Per1x128Tile);
}
bool is_fp8_blocks(const Operand& o) {
  return is_fp8_tiles(o) || has_layout(o.format, 8, formats::ScaleFormat::kFp32Per128x128Block);
}

bool is_block_format(const Operand& o) {
  return has_layout(o.format, 8, formats::ScaleFormat::kE8m0PerBlock) ||
         has_layout(o.format, 4, formats::ScaleFormat::kE8m0PerBlock) ||
         has_layout(o.format, 4, formats::ScaleFormat::kE4m3PerBlockFp32PerTensor);
}

std::string describe(const Operand& o) {
  const std::string what =
      o.dense() ? std::string(o.data.dtype().name()) : std::string(formats::format_name(*o.format));
  const bool columns = o.blocks == formats::BlockAxis::kAlongColumns;
  return what + (o.tiles_16x16 ? " 16x16-tiled " : (columns ? " column-blocked " : " ")) +
         shape_str(o.shape) + (o.transposed ? "^T" : "");
}

// The dense operand as the tensor the product reads (a transposed view where asked).
Tensor matrix_of(const Operand& o) {
  const Tensor t = o.data.detach();
  return o.transposed ? t.transpose(-1, -2) : t;
}

// op(X)'s (rows, cols) of a 2-D operand described by its shape.
int64_t rows_of(const Operand& o) { return o.transposed ? o.shape[1] : o.shape[0]; }
int64_t cols_of(const Operand& o) { return o.transposed ? o.shape[0] : o.shape[1]; }

void check_bias(const Tensor& bias, int64_t n) {
  if (!bias.defined()) return;
  MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == n, kWhere,
                 "bias of shape {} does not match {} output columns", shape_str(bias.shape()), n);
}

bool on_gpu(const Operand& a, const Operand& b) { return a.data.is_cuda() || b.data.is_cuda(); }

// ---------------------------------------------------------------------------------------------
// Dense operands.

// a @ b (+ bias) at full precision on the CPU: float64 kernel, native GEMM or oneDNN.
Tensor dense_exact(const Tensor& a, const Tensor& b, const Tensor& bias) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape ba(a.shape().begin(), a.shape().end() - 2);
  const Shape bb(b.shape().begin(), b.shape().end() - 2);
  Shape out_shape = broadcast_shapes(ba, bb, "matmul");
  out_shape.insert(out_shape.end(), {M, N});

  if (numel_of(out_shape) == 0) return empty(out_shape, a.dtype());
  if (K == 0) {  // empty sum: zeros (plus the bias)
    Tensor out = zeros(out_shape, a.dtype());
    if (bias.defined()) mantissa::detail::copy_unchecked(out, bias);
    return out;
  }
  // b without batch (a weight): fold a's batch into rows, one large GEMM instead of many.
  if (!ba.empty() && numel_of(bb) == 1 && a.is_contiguous()) {
    Tensor out = dense_exact(a.view({-1, K}), b.reshape({K, N}), bias);
    return out.view(out_shape);
  }
  Tensor out = empty(out_shape, a.dtype());
  const int64_t batch = out.numel() / (M * N);
  if (a.dtype() == kFloat64) {
    d::f64_product(a, b, bias, out);
  } else if (kernels::gemm_backend() == kernels::GemmBackend::kAuto &&
             d::few_rows_product_fits(a, b, batch)) {
    // A Linear's forward for a few rows (generation): W read once per row at memory speed.
    d::few_rows_product(a, b, bias, out);
  } else if (kernels::use_native_gemm(a.dtype(), batch, M, N, K,
                                      a.stride(-1) != 1 && a.stride(-2) == 1,
                                      a.stride(-1) == 1 ? a.stride(-2) : 0)) {
    d::native_product(a, b, bias, out);
  } else {
    d::onednn_product(a, b, bias, out);
  }
  return out;
}

// float32 operands under a bf16 setting: the operands as bf16 terms (kernels/cpu/gemm/
// bf16_split.h), one GEMM with fp32 accumulation over the terms -- oneDNN's bf16 matmul with an
// fp32 destination where the CPU has native bf16 dot products (AVX-512 BF16, AMX; "medium" and
// 2-D "high" build their terms in the operands' own layouts there), the native GEMM where it
// runs bf16 (AVX2 widening the terms while packing), else the fp32 GEMM on the bf16 values
// (same products, same accumulator, no speed-up).
Tensor float32_as_bf16(const Tensor& a, const Tensor& b, const Tensor& bias,
                       Float32Products products) {
  static std::once_flag warned;
  std::call_once(warned, [products] {
    const std::string w = float32_emulation_warning(products);
    if (!w.empty()) warn(w);  // through warn: compare's reports record it
  });
  const int terms = products == Float32Products::kBf16x3 ? 3 : 1;
  const bool onednn_bf16 = kernels::onednn_native_bf16();
  if (onednn_bf16) {
    if (terms == 1) return d::bf16_rounded_onednn(a, b, bias);
    if (a.dim() == 2 && b.dim() == 2) return d::bf16x3_onednn(a, b, bias);
  }
  if (!kernels::gemm_native_supported(kBFloat16)) {
    const d::Bf16Terms t = d::bf16_terms(a, b, terms, kFloat32);
    return dense_exact(t.a, t.b, bias);
  }
  const d::Bf16Terms t = d::bf16_terms(a, b, terms, kBFloat16);
  Shape out_shape = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                     Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  out_shape.insert(out_shape.end(), {a.size(-2), b.size(-1)});
  // oneDNN's bf16 matmul where it has native bf16: AMX tiles where the CPU has them, many times
  // faster than the native AVX-512 BF16 GEMM at the sizes layers have.
  Tensor out = onednn_bf16 ? d::onednn_bf16_accumulator(t.a, t.b, out_shape)
                           : d::native_bf16_accumulator(t.a, t.b, out_shape);
  d::add_bias_f32(out, bias);
  return out;
}

// bfloat16 (M, K) @ (K, N) with the fp32 accumulator as the float32 result: oneDNN's native
// bf16 products where the CPU has them; else the native GEMM where it runs bf16 (AVX2: it reads
// both operands in place, any strides, and widens them while it packs), else the fp32 product
// of widened copies. The same products everywhere: a product of two bf16 values is exact in
// fp32. (A weight gradient's transposed operand is read in place by the native GEMM; widened
// copies cost a transposing copy and two conversion passes, the copy alone 5 % of int8-training's
// GPT step on AVX2.)
Tensor bf16_accumulator(const Tensor& a, const Tensor& b) {
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2, kWhere,
                 "the fp32 accumulator of bfloat16 operands is offered for 2-D operands, got {} "
                 "and {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  const Shape out_shape{a.size(0), b.size(1)};
  if (numel_of(out_shape) == 0) return empty(out_shape, kFloat32);
  if (a.size(1) == 0) return mantissa::detail::zero_unchecked(empty(out_shape, kFloat32));
  if (kernels::onednn_native_bf16()) return d::onednn_bf16_accumulator(a, b, out_shape);
  if (kernels::gemm_native_supported(kBFloat16)) return d::native_bf16_accumulator(a, b, out_shape);
  return dense_exact(a.to(kFloat32), b.to(kFloat32), Tensor());
}

Tensor dense_on_cpu(const Tensor& a, const Tensor& b, const Epilogue& e);

// bfloat16/float16 (M, K) @ (K, N) as float32 holding the products rounded to their dtype.
// Where the native AVX2 GEMM runs the product it rounds in its epilogue and stores fp32, so
// neither the narrow result nor the widening pass is made.
Tensor rounded_then_widened(const Tensor& a, const Tensor& b, const Epilogue& e) {
  const DType dt = a.dtype();
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2 && (dt == kBFloat16 || dt == kFloat16) &&
                     *e.round_to == dt && !e.bias.defined(),
                 kWhere,
                 "round_to is offered for 2-D bfloat16 or float16 operands rounded to their own "
                 "dtype, without a bias; got {} {} @ {}, round_to {}",
                 dt.name(), shape_str(a.shape()), shape_str(b.shape()), e.round_to->name());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const bool a_transposed = a.stride(-1) != 1 && a.stride(-2) == 1;
  if (M > 0 && N > 0 && K > 0 && kernels::gemm_avx2_path(dt) &&
      kernels::use_native_gemm(dt, 1, M, N, K, a_transposed,
                               a.stride(-1) == 1 ? a.stride(-2) : 0)) {
    Tensor out = empty({M, N}, kFloat32);
    d::native_product(a, b, Tensor(), out, dt);
    return out;
  }
  Epilogue plain;
  plain.float32 = e.float32;
  return dense_on_cpu(a, b, plain).to(kFloat32);
}

Tensor dense_on_cpu(const Tensor& a, const Tensor& b, const Epilogue& e) {
  const DType dt = a.dtype();
  if (e.round_to) return rounded_then_widened(a, b, e);
  if (e.out_dtype && *e.out_dtype != dt) {
    MANTISSA_CHECK(dt == kBFloat16 && *e.out_dtype == kFloat32 && !e.bias.defined(), kWhere,
                   "a dense product's output is its operands' dtype ({}), or the float32 "
                   "accumulator of bfloat16 operands without a bias; got out_dtype {}",
                   dt.name(), e.out_dtype->name());
    return bf16_accumulator(a, b);
  }
  const Float32Products f32 = *e.float32;
  if (dt == kFloat32 && f32 != Float32Products::kExact && a.size(-1) > 0 && a.numel() > 0 &&
      b.numel() > 0) {
    const int64_t K = a.size(-1), N = b.size(-1);
    const Shape ba(a.shape().begin(), a.shape().end() - 2);
    const Shape bb(b.shape().begin(), b.shape().end() - 2);
    if (!ba.empty() && numel_of(bb) == 1 && a.is_contiguous()) {
      Shape out_shape = ba;
      out_shape.insert(out_shape.end(), {a.size(-2), N});
      return float32_as_bf16(a.view({-1, K}), b.reshape({K, N}), e.bias, f32).view(out_shape);
    }
    return float32_as_bf16(a, b, e.bias, f32);
  }
  return dense_exact(a, b, e.bias);
}

Tensor dense_product(const Operand& ao, const Operand& bo, const Epilogue& e) {
  const Tensor a = matrix_of(ao), b = matrix_of(bo);
  MANTISSA_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.dtype() == b.dtype() && a.size(-1) == b.size(-2),
                 kWhere,
                 "dense operands must be at least 2-D, of one dtype, with matching inner "
                 "dimensions; got {} {} @ {} {}",
                 a.dtype().name(), shape_str(a.shape()), b.dtype().name(), shape_str(b.shape()));
  const Tensor bias = e.bias.defined() ? e.bias.detach() : Tensor();
  const Float32Products f32 = e.float32.value_or(default_float32_products());
  // GPU operands: cuBLASLt, float32 on TF32 tensor cores unless the products are exact
  // (PyTorch's meaning of "high" and "medium" on NVIDIA GPUs).
  if (a.is_cuda() || b.is_cuda()) {
    const Tensor y = kernels::cuda::matmul(a, b, bias, f32 != Float32Products::kExact);
    if (e.round_to || (e.out_dtype && *e.out_dtype != y.dtype())) return y.to(kFloat32);
    return y;
  }
  Epilogue ed = e;
  ed.bias = bias;
  ed.float32 = f32;
  return dense_on_cpu(a, b, ed);
}

// ---------------------------------------------------------------------------------------------
// A dense operand times a 4-bit weight.

// The forward takes oneDNN's tiled layout for W from this many input rows. Its transposing pack
// costs about what the GEMM saves, so it pays where the product is long: bench_linear4bit on the
// AMX Xeon (before its AMX kernels took the small batches), NF4 / bf16 speed with and without
// it, GPT shapes at 2048 rows 1.01-1.07 against 0.96-0.99, the MLP's at 64 and 256 rows
// 0.64-0.73 against 0.69-0.87. On AVX-512 BF16 without AMX it made no difference below.
constexpr int64_t kTiledForwardMinRows = 1024;

Tensor four_bit_product(const Operand& xo, const Operand& wo, const Epilogue& e) {
  const Tensor x = xo.data.detach();
  MANTISSA_CHECK(wo.shape.size() == 2 && x.dim() == 2 && !xo.transposed, kWhere,
                 "a 4-bit product takes a 2-D dense left operand and a 2-D weight; got {} @ {}",
                 describe(xo), describe(wo));
  MANTISSA_CHECK(x.size(1) == rows_of(wo), kWhere, "inner dimensions differ: {} @ {}", describe(xo),
                 describe(wo));
  MANTISSA_CHECK(wo.scales.defined() && wo.scales.dtype() == kFloat32 &&
                     wo.scales.numel() == (numel_of(wo.shape) + wo.block - 1) / wo.block,
                 kWhere, "a 4-bit weight needs its float32 absmax per block of {}", wo.block);
  MANTISSA_CHECK(!e.out_dtype || *e.out_dtype == x.dtype(), kWhere,
                 "a 4-bit product's output is in its activations' dtype {}", x.dtype().name());
  check_bias(e.bias, cols_of(wo));
  const bool forward = wo.transposed;  // x @ W^T; else the input gradient g @ W
  const Tensor bias = e.bias.defined() ? e.bias.detach().contiguous() : Tensor();
  const Float32Products f32 = e.float32.value_or(default_float32_products());
  if (x.is_cuda()) return d::four_bit_on_gpu(x, wo, bias, f32);
  const d::FourBitWeight w{*wo.format, wo.shape, wo.block, wo.data, wo.scales.contiguous()};
  const Tensor xc = x.contiguous();
  const DType cd = xc.dtype();
  const GemmBackend backend = kernels::gemm_backend();
  // A forward of few rows (generation: one per token) decodes W's codes in registers and reads
  // them once per four rows, unless MANTISSA_GEMM=onednn; bf16 on AMX keeps the AMX kernels.
  const bool amx_bf16 = xc.dtype() == kBFloat16 && backend != GemmBackend::kNative &&
                        kernels::quant::amx_bf16_usable();
  if (forward && xc.size(0) > 0 && xc.size(0) <= kernels::quant::kFourBitGemvMaxRows &&
      backend != GemmBackend::kOnednn && !amx_bf16)
    return d::four_bit_gemv_forward(xc, w, bias);
  // The native AVX2 GEMM decodes W inside its packing, unless MANTISSA_GEMM=onednn.
  if (kernels::gemm_native_lowbit_supported() && backend != GemmBackend::kOnednn)
    return d::four_bit_fused(xc, w, forward, bias);
  // mantissa's AMX kernels for bf16 and few rows, unless MANTISSA_GEMM=native.
  const int64_t rows = xc.size(0);
  if (cd == kBFloat16 && rows > 0 && rows <= kernels::quant::kFourBitAmxMaxRows &&
      backend != GemmBackend::kNative && kernels::quant::amx_bf16_usable())
    return forward ? d::four_bit_amx_forward(xc, w, bias) : d::four_bit_amx_input_grad(xc, w);
  // Chunks decoded into oneDNN's tiled layout for bf16 where the CPU has native bf16 (oneDNN
  // then skips repacking B on every call), unless MANTISSA_GEMM=native.
  const bool tiled = cd == kBFloat16 && has_native_bf16() && backend != GemmBackend::kNative;
  return forward
             ? d::four_bit_chunked_forward(xc, w, bias, tiled && rows >= kTiledForwardMinRows, f32)
             : d::four_bit_chunked_input_grad(xc, w, tiled, f32);
}

// ---------------------------------------------------------------------------------------------
// Two FP8 operands, and two int8 ones.

// FP8 codes are decoded inside the native AVX2 GEMM's packing, unless MANTISSA_GEMM=onednn.
bool fused_fp8() {
  return kernels::gemm_native_lowbit_supported() && kernels::gemm_backend() != GemmBackend::kOnednn;
}

Tensor fp8_product(const Operand& a, const Operand& b, const Epilogue& e) {
  MANTISSA_CHECK(a.data.dim() == 2 && b.data.dim() == 2, kWhere,
                 "FP8 operands must be 2-D, got {} and {}", describe(a), describe(b));
  MANTISSA_CHECK(cols_of(a) == rows_of(b), kWhere, "inner dimensions differ: {} @ {}", describe(a),
                 describe(b));
  check_bias(e.bias, cols_of(b));
  const DType out = e.out_dtype.value_or(kFloat32);
  const float alpha = a.scale_inv * b.scale_inv;
  // Row and column scales: fp32, one per output row and column, read contiguously.
  auto scale_vector = [&](const Tensor& s, int64_t n, const char* what) {
    if (!s.defined()) return Tensor();
    MANTISSA_CHECK(s.dim() == 1 && s.size(0) == n && s.dtype() == kFloat32 && !s.is_cuda(), kWhere,
                   "{} scales must be 1-D float32 on the CPU with {} values, got {} {}", what, n,
                   s.dtype().name(), shape_str(s.shape()));
    return s.contiguous();
  };
  const d::RowColScales scales{scale_vector(e.row_scale, rows_of(a), "row"),
                               scale_vector(e.col_scale, cols_of(b), "column"),
                               e.bias_after_rounding};
  if (on_gpu(a, b)) {
    MANTISSA_CHECK(!scales.any() && !e.bias_after_rounding, "fp8_gemm",
                   "row and column scales and a bias after rounding are applied on the CPU only; "
                   "got GPU operands");
    MANTISSA_CHECK(b.data.device() == a.data.device() &&
                       (!e.bias.defined() || e.bias.device() == a.data.device()),
                   "fp8_gemm", "expected every operand on {}, got {}{}", a.data.device().str(),
                   b.data.device().str(),
                   e.bias.defined() ? " (bias on " + e.bias.device().str() + ")" : std::string());
    return d::fp8_on_gpu(a, b, e.bias, out, alpha);
  }
  const int64_t K = cols_of(a);
  if (fused_fp8() && K > 0 && a.data.numel() > 0 && b.data.numel() > 0)
    return d::fp8_fused(a, b, e.bias, out, alpha, scales);
  const DType wide = has_native_bf16() ? kBFloat16 : kFloat32;
  return d::fp8_widened(a, b, e.bias, out, alpha, wide, K > 0 && kernels::onednn_native_bf16(),
                        scales);
}

// Two block-scaled FP8 operands: 1x128 tiles must lie along K.
Tensor fp8_block_product(const Operand& a, const Operand& b, const Epilogue& e) {
  MANTISSA_CHECK(a.data.dim() == 2 && b.data.dim() == 2, kWhere,
                 "block-scaled FP8 operands must be 2-D, got {} and {}", describe(a), describe(b));
  MANTISSA_CHECK(cols_of(a) == rows_of(b), kWhere, "inner dimensions differ: {} @ {}", describe(a),
                 describe(b));
  MANTISSA_CHECK(!(is_fp8_tiles(a) && a.transposed) && !(is_fp8_tiles(b) && !b.transposed), kWhere,
                 "a 1x128-tiled FP8 operand is read along its tiles, which must lie along the "
                 "product's K (A as stored, B transposed); got {} @ {}: quantize the transposed "
                 "tensor instead",
                 describe(a), describe(b));
  MANTISSA_CHECK(!on_gpu(a, b), kWhere,
                 "block-scaled FP8 products run on the CPU only, got {} @ {} on {}", describe(a),
                 describe(b), (a.data.is_cuda() ? a.data : b.data).device().str());
  check_bias(e.bias, cols_of(b));
  return d::fp8_block_product(a, b, e.bias, e.out_dtype.value_or(kFloat32));
}

// Two block-format operands: blocks along K, except 16x16 tiles, which may be read either way.
Tensor block_format_product(const Operand& a, const Operand& b, const Epilogue& e) {
  // Whether an operand's blocks lie along the product's K: rows' blocks where A is read as
  // stored (B transposed), columns' blocks where A is read transposed (B as stored).
  const auto along_k = [](const Operand& o, bool a_side) {
    const bool columns = o.blocks == formats::BlockAxis::kAlongColumns;
    return o.tiles_16x16 || (o.transposed == a_side) == columns;
  };
  const Operand& off = along_k(a, true) ? b : a;
  const bool off_columns = off.blocks == formats::BlockAxis::kAlongColumns;
  MANTISSA_CHECK(along_k(a, true) && along_k(b, false), kWhere,
                 "a block-format operand is read along its {}x{} blocks, which must lie along the "
                 "product's K (row blocks: A as stored, B transposed; column blocks: A "
                 "transposed, B as stored); got {} @ {}: quantize the transposed tensor instead",
                 off_columns ? off.block : 1, off_columns ? 1 : off.block, describe(a),
                 describe(b));
  MANTISSA_CHECK(cols_of(a) == rows_of(b), kWhere, "inner dimensions differ: {} @ {}", describe(a),
                 describe(b));
  MANTISSA_CHECK(!on_gpu(a, b), kWhere,
                 "block-format products run on the CPU only, got {} @ {} on {}", describe(a),
                 describe(b), (a.data.is_cuda() ? a.data : b.data).device().str());
  check_bias(e.bias, cols_of(b));
  return d::block_format_product(a, b, e.bias, e.out_dtype.value_or(kFloat32));
}

Tensor int8_product(const Operand& a, const Operand& b, const Epilogue& e) {
  MANTISSA_CHECK(a.data.dim() == 2 && b.data.dim() == 2 && !a.transposed && b.transposed, kWhere,
                 "int8 products take codes (M, K) @ (N, K)^T, got {} @ {}", describe(a),
                 describe(b));
  MANTISSA_CHECK(cols_of(a) == rows_of(b), kWhere, "inner dimensions differ: {} @ {}", describe(a),
                 describe(b));
  const DType out = e.out_dtype.value_or(kFloat32);
  MANTISSA_CHECK(out == kFloat32 || out == kBFloat16 || out == kFloat16, kWhere,
                 "int8 products give float32, bfloat16 or float16, got out_dtype {}", out.name());
  check_bias(e.bias, cols_of(b));
  return d::int8_rowwise_product(a, b, e.addend, e.bias, out);
}

}  // namespace

Operand dense(const Tensor& values) {
  Operand o;
  o.data = values;
  o.shape = values.defined() && values.dim() >= 2 ? Shape{values.size(-2), values.size(-1)}
                                                  : (values.defined() ? values.shape() : Shape{});
  return o;
}

Operand fp8(const Tensor& codes, float scale_inv, const Tensor& widened,
            const Tensor& transposed_codes) {
  MANTISSA_CHECK(codes.defined() && codes.dtype().is_float8(), kWhere,
                 "FP8 operands hold float8 codes, got {}",
                 codes.defined() ? codes.dtype().name() : "an undefined tensor");
  Operand o;
  o.data = codes;
  o.format = codes.dtype() == kFloat8_e4m3fn ? FormatId::kE4m3 : FormatId::kE5m2;
  o.shape = codes.shape();
  o.scale_inv = scale_inv;
  o.widened = widened;
  o.transposed_codes = transposed_codes;
  return o;
}

Operand fp8_blocks(FormatId format, const Tensor& codes, const Tensor& scale_inv) {
  Operand o;
  o.data = codes;
  o.format = format;
  MANTISSA_CHECK(is_fp8_blocks(o), kWhere,
                 "fp8_blocks takes an FP8 format with fp32 scales per 1x128 tile or 128x128 "
                 "block, got {}",
                 formats::format_name(format));
  // Contiguous, or the transposed view of a contiguous matrix (a 128x1 cast read as the 1x128
  // tiles of its transpose).
  const auto laid_out = [](const Tensor& t) { return t.is_contiguous() || t.t().is_contiguous(); };
  MANTISSA_CHECK(
      codes.defined() && codes.dim() == 2 && codes.dtype() == kFloat8_e4m3fn && laid_out(codes),
      kWhere, "{} operands hold 2-D contiguous float8_e4m3fn codes (or their transpose)",
      formats::format_name(format));
  const int64_t tile_rows = is_fp8_tiles(o) ? 1 : 128;
  const Shape want{(codes.size(0) + tile_rows - 1) / tile_rows, (codes.size(1) + 127) / 128};
  MANTISSA_CHECK(scale_inv.defined() && scale_inv.dtype() == kFloat32 && scale_inv.dim() == 2 &&
                     scale_inv.shape() == want && laid_out(scale_inv),
                 kWhere, "{} codes of shape {} need a contiguous float32 scale_inv of shape {}",
                 formats::format_name(format), shape_str(codes.shape()), shape_str(want));
  o.shape = codes.shape();
  o.scales = scale_inv;
  o.block = 128;
  return o;
}

namespace {

// block_scaled's and block_scaled_columns's operand, its codes and scales checked.
Operand block_format_operand(FormatId format, const Tensor& codes, const Tensor& scales,
                             const Shape& shape, formats::BlockAxis blocks) {
  Operand o;
  o.data = codes;
  o.format = format;
  MANTISSA_CHECK(is_block_format(o), kWhere,
                 "block_scaled takes mxfp8-e4m3, mxfp8-e5m2, mxfp4 or nvfp4, got {}",
                 formats::format_name(format));
  MANTISSA_CHECK(shape.size() == 2 && shape[0] >= 0 && shape[1] >= 0, kWhere,
                 "a {} operand is a matrix (rows, cols), got shape {}",
                 formats::format_name(format), shape_str(shape));
  const formats::BlockLayout l{
      .format = format, .rows = shape[0], .cols = shape[1], .blocks = blocks};
  const bool rows = blocks == formats::BlockAxis::kAlongRows;
  MANTISSA_CHECK(codes.defined() && codes.dtype() == kUInt8 && codes.is_contiguous() &&
                     !codes.is_cuda() && codes.numel() == l.code_bytes(),
                 kWhere, "{} {} needs {} contiguous uint8 code bytes on the CPU, got {}",
                 formats::format_name(format), shape_str(shape), l.code_bytes(),
                 codes.defined()
                     ? std::string(codes.dtype().name()) + " " + shape_str(codes.shape())
                     : std::string("an undefined tensor"));
  MANTISSA_CHECK(
      scales.defined() && scales.dtype() == kUInt8 && scales.is_contiguous() && !scales.is_cuda() &&
          scales.numel() == l.scale_bytes(),
      kWhere, "{} {} needs {} contiguous uint8 scale bytes (one per {}x{} block), got {}",
      formats::format_name(format), shape_str(shape), l.scale_bytes(), rows ? 1 : l.block(),
      rows ? l.block() : 1,
      scales.defined() ? std::string(scales.dtype().name()) + " " + shape_str(scales.shape())
                       : std::string("an undefined tensor"));
  o.shape = shape;
  o.scales = scales;
  o.block = l.block();
  o.blocks = blocks;
  return o;
}

}  // namespace

Operand block_scaled(FormatId format, const Tensor& codes, const Tensor& scales, const Shape& shape,
                     float tensor_scale, bool tiles_16x16) {
  Operand o = block_format_operand(format, codes, scales, shape, formats::BlockAxis::kAlongRows);
  const formats::BlockLayout l{.format = format, .rows = shape[0], .cols = shape[1]};
  MANTISSA_CHECK(!tiles_16x16 || format == FormatId::kNvfp4, kWhere,
                 "16x16 tiles are an nvfp4 layout, got {}", formats::format_name(format));
  if (tiles_16x16) {  // each tile's scale stands in all 16 of its rows
    const int64_t rs = l.row_scales();
    const auto* s = static_cast<const uint8_t*>(scales.data_ptr());
    for (int64_t r = 0; r < l.rows; ++r) {
      const int64_t first = r / 16 * 16;
      MANTISSA_CHECK(std::equal(s + r * rs, s + (r + 1) * rs, s + first * rs), kWhere,
                     "nvfp4 {} marked 16x16-tiled has row {} with scales other than row {}'s",
                     shape_str(shape), r, first);
    }
  }
  o.scale_inv = tensor_scale;
  o.tiles_16x16 = tiles_16x16;
  return o;
}

Operand block_scaled_columns(FormatId format, const Tensor& codes, const Tensor& scales,
                             const Shape& shape) {
  MANTISSA_CHECK(
      format != FormatId::kNvfp4, kWhere,
      "blocks along the columns are an MX layout (mxfp8-e4m3, mxfp8-e5m2, mxfp4), got {}",
      formats::format_name(format));
  return block_format_operand(format, codes, scales, shape, formats::BlockAxis::kAlongColumns);
}

Operand four_bit(FormatId format, const Tensor& packed, const Shape& shape, int64_t block,
                 const Tensor& absmax) {
  Operand o;
  o.data = packed;
  o.format = format;
  MANTISSA_CHECK(is_four_bit(o), kWhere,
                 "four_bit takes a 4-bit format with fp32 block absmax, "
                 "got {}",
                 formats::format_name(format));
  o.shape = shape;
  o.block = block;
  o.scales = absmax;
  return o;
}

Operand int8_rows(const Tensor& codes, const Tensor& row_absmax) {
  MANTISSA_CHECK(codes.defined() && codes.dtype() == kInt8 && codes.dim() == 2, kWhere,
                 "int8 operands hold 2-D int8 codes");
  Operand o;
  o.data = codes;
  o.format = FormatId::kInt8Rowwise;
  o.shape = codes.shape();
  o.scales = row_absmax;
  return o;
}

Tensor gemm(const Operand& a, const Operand& b, const Epilogue& e) {
  MANTISSA_CHECK(a.data.defined() && b.data.defined(), kWhere, "an operand is undefined");
  MANTISSA_CHECK(!(e.row_scale.defined() || e.col_scale.defined() || e.bias_after_rounding) ||
                     (is_fp8(a) && is_fp8(b)),
                 kWhere,
                 "row and column scales and a bias after rounding are for two FP8 operands, got "
                 "{} @ {}",
                 describe(a), describe(b));
  if (a.dense() && b.dense()) return dense_product(a, b, e);
  if (a.dense() && is_four_bit(b)) return four_bit_product(a, b, e);
  if (is_fp8(a) && is_fp8(b)) return fp8_product(a, b, e);
  if (is_int8(a) && is_int8(b)) return int8_product(a, b, e);
  if (is_fp8_blocks(a) && is_fp8_blocks(b)) return fp8_block_product(a, b, e);
  if (is_block_format(a) && is_block_format(b)) return block_format_product(a, b, e);
  fail(kWhere, "no product of a {} operand with a {} operand", describe(a), describe(b));
}

Float32Products default_float32_products() { return g_float32.load(); }
void set_default_float32_products(Float32Products products) { g_float32 = products; }

bool fp8_products_widen_codes() { return !fused_fp8() && has_native_bf16(); }

bool fp8_products_layout_free() { return fused_fp8(); }

std::string float32_emulation_warning(Float32Products products) {
  if (products == Float32Products::kExact || has_native_bf16()) return "";
  const std::string name = products == Float32Products::kBf16x3 ? "high" : "medium";
  return "float32 matmul precision '" + name + "': " + why_bf16_products_are_widened() +
         ", so the bf16 products run on the fp32 GEMM (operands rounded while packing): the "
         "numerics of '" +
         name + "', but no faster than 'highest'";
}

}  // namespace mantissa::gemm
