// matmul: torch.matmul semantics on top of the graph-free engine in this file.
// f32/bf16 -> the native GEMM or oneDNN (kernels/cpu/gemm/gemm_backend.h picks; fp32
// accumulation either way). The native GEMM also takes f16 (and, without AVX-512 BF16, bf16)
// and widens those operands inside its packing; on the oneDNN route (the shapes it declines)
// f16, and bf16 where oneDNN has no native bf16 kernels, is widened to f32 in a separate pass
// and rounded once. f64 ->
// kernels/cpu/gemm/gemm_f64.h (AVX2+FMA 6x8 tile of doubles, or the blocked reference GEMM
// without AVX2; double accumulation either way). Backward: dA = dC @ B^T, dB = A^T @ dC, summed
// over broadcast batch dims.
#include "mantissa/ops/matmul.h"
#include "mantissa/core/op_profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/inplace.h"
#include "core/strided_loops.h"
#include "kernels/cpu/gemm/bf16_split.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_f64.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cuda/gemm/cuda_gemm.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/core/warning.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/ops/matmul_precision.h"
#include "ops/complex_arith.h"
#include "ops/matmul_impl.h"

namespace mantissa {
namespace detail {

Tensor matmul_exact(const Tensor& a, const Tensor& b, const Tensor& bias);

namespace {

bool dense(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// A GEMM operand: data plus the strides to read it with, and the tensor keeping it alive.
struct Operand {
  Tensor keep;
  const void* data;
  Shape shape;
  Shape strides;
};

// Reads x in place when it is contiguous or "transposed-contiguous" (dense once its last two
// dims are swapped); strides of size-1 dims are normalised so equal layouts share a cached
// primitive. Anything else is copied to contiguous.
Operand prepare(const Tensor& x) {
  const Shape& s = x.shape();
  if (x.is_contiguous()) return {x, x.data_ptr(), s, contiguous_strides(s)};
  Shape swapped = s, swapped_strides = x.strides();
  std::swap(swapped[s.size() - 1], swapped[s.size() - 2]);
  std::swap(swapped_strides[s.size() - 1], swapped_strides[s.size() - 2]);
  if (dense(swapped, swapped_strides)) {
    Shape st = contiguous_strides(swapped);
    std::swap(st[s.size() - 1], st[s.size() - 2]);
    return {x, x.data_ptr(), s, st};
  }
  Tensor c = x.contiguous();
  return {c, c.data_ptr(), s, contiguous_strides(s)};
}

// A prepared f16/bf16 operand widened to f32 with the same layout: both layouts prepare()
// accepts cover exactly numel consecutive elements from the data pointer.
Operand widen(const Operand& op, DType dt) {
  const int64_t n = numel_of(op.shape);
  Tensor w = empty({n}, kFloat32);
  convert_buffer(op.data, dt, w.data<float>(), kFloat32, n);
  return {w, w.data_ptr(), op.shape, op.strides};
}

// The operand as oneDNN sees it, padded with leading size-1 dims to rank nd.
kernels::MatmulOperand to_onednn(const Operand& op, size_t nd) {
  int64_t extent = 1;
  for (size_t i = 0; i < op.shape.size(); ++i)
    extent = std::max(extent, op.shape[i] * op.strides[i]);
  const size_t lead = nd - op.shape.size();
  kernels::MatmulOperand m;
  m.data = op.data;
  m.dims.assign(lead, 1);
  m.strides.assign(lead, extent);
  m.dims.insert(m.dims.end(), op.shape.begin(), op.shape.end());
  m.strides.insert(m.strides.end(), op.strides.begin(), op.strides.end());
  return m;
}

kernels::MatmulOperand bias_operand(const void* data, int64_t n, size_t nd) {
  kernels::MatmulOperand m;
  m.data = data;
  m.dims.assign(nd, 1);
  m.dims.back() = n;
  m.strides.assign(nd, n);
  m.strides.back() = 1;
  return m;
}

// Per batch entry of out, the element offsets of a's and b's matrices (broadcast batch dims
// repeat an offset). Size-1 dims have stride 0 after broadcast_strides.
void batch_offsets(const Tensor& a, const Tensor& b, const Tensor& out, std::vector<int64_t>& a_off,
                   std::vector<int64_t>& b_off) {
  const int64_t nd = out.dim();
  const int64_t M = out.size(-2), N = out.size(-1), K = a.size(-1);
  const Shape& os = out.shape();
  Shape a_full(os.begin(), os.end() - 2), b_full = a_full;
  a_full.insert(a_full.end(), {M, K});
  b_full.insert(b_full.end(), {K, N});
  const Shape as = kernels::broadcast_strides(a, a_full);
  const Shape bs = kernels::broadcast_strides(b, b_full);
  const int64_t batch = out.numel() / (M * N);
  a_off.assign(batch, 0);
  b_off.assign(batch, 0);
  for (int64_t i = 0; i < batch; ++i) {
    int64_t rem = i, ao = 0, bo = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      const int64_t idx = rem % os[d];
      rem /= os[d];
      ao += idx * as[d];
      bo += idx * bs[d];
    }
    a_off[i] = ao;
    b_off[i] = bo;
  }
}

// f64: any strides are fine (the kernel packs both operands' panels), so nothing is copied.
void run_f64(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out) {
  const int64_t M = out.size(-2), N = out.size(-1), K = a.size(-1);
  std::vector<int64_t> a_off, b_off;
  batch_offsets(a, b, out, a_off, b_off);
  const int64_t batch = static_cast<int64_t>(a_off.size());
  kernels::GemmF64Args g;
  g.batch = batch;
  g.M = M;
  g.N = N;
  g.K = K;
  g.a = {a.data<double>(), a.stride(-2), a.stride(-1)};
  g.a_offsets = a_off.data();
  g.b = {b.data<double>(), b.stride(-2), b.stride(-1)};
  g.b_offsets = b_off.data();
  double* c = out.data<double>();
  g.c = c;
  kernels::gemm_f64(g);
  if (bias.defined()) {
    Tensor bc = bias.contiguous();
    const double* pb = bc.data<double>();
    const int64_t rows = out.numel() / N;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < N; ++j) c[r * N + j] += pb[j];
  }
}

// On the native GEMM (gemm_native_supported: f32/bf16/f16 on AVX2 and AVX-512): it packs from any
// strides, widening narrow operands as it goes, so nothing is copied or converted first. out is
// in a's dtype, or float32 holding the products rounded through round_to
// (GemmArgs::round_to: matmul_nograd_widened).
void run_native(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                DType round_to = kFloat32) {
  std::vector<int64_t> a_off, b_off;
  batch_offsets(a, b, out, a_off, b_off);
  Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  kernels::GemmArgs g;
  g.dtype = a.dtype();
  g.out_dtype = out.dtype();
  g.round_to = round_to;
  g.batch = static_cast<int64_t>(a_off.size());
  g.M = out.size(-2);
  g.N = out.size(-1);
  g.K = a.size(-1);
  g.a = {a.data_ptr(), a.stride(-2), a.stride(-1), a_off.data()};
  g.b = {b.data_ptr(), b.stride(-2), b.stride(-1), b_off.data()};
  g.bias = bc.defined() ? bc.data_ptr() : nullptr;
  g.c = out.data_ptr();
  kernels::gemm_native(g);
}

void run_onednn(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out) {
  const size_t nd = static_cast<size_t>(out.dim());
  const DType dt = a.dtype();
  Operand pa = prepare(a), pb = prepare(b);
  if (dt == kFloat16 || (dt == kBFloat16 && !kernels::onednn_native_bf16())) {
    // No f16 matmul on CPUs without AVX-512 FP16, and no bf16 one in oneDNN on CPUs without
    // AVX-512: widen, multiply in f32, round once. Nor where the CPU has AVX-512 but not its
    // BF16 dot products (Skylake-X to Ice Lake): oneDNN's bf16 matmul emulates them there, and
    // the MLP's bf16-mixed step ran at 0.23 of its 32-true speed; widened, the product runs on
    // the AVX-512 f32 kernels.
    pa = widen(pa, dt);
    pb = widen(pb, dt);
    Tensor acc = empty(out.shape(), kFloat32);
    Tensor bias32 = bias.defined() ? bias.to(kFloat32).contiguous() : Tensor();
    const auto bop = bias32.defined() ? bias_operand(bias32.data_ptr(), out.size(-1), nd)
                                      : kernels::MatmulOperand{};
    kernels::onednn_matmul(kFloat32, to_onednn(pa, nd), to_onednn(pb, nd),
                           bias32.defined() ? &bop : nullptr, kFloat32, acc.data_ptr(),
                           out.shape());
    convert_buffer(acc.data<float>(), kFloat32, out.data_ptr(), dt, out.numel());
    return;
  }
  Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  const auto bop =
      bc.defined() ? bias_operand(bc.data_ptr(), out.size(-1), nd) : kernels::MatmulOperand{};
  kernels::onednn_matmul(dt, to_onednn(pa, nd), to_onednn(pb, nd), bc.defined() ? &bop : nullptr,
                         dt, out.data_ptr(), out.shape());
}

}  // namespace

void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  const DType da = a.dtype(), db = b.dtype();
  auto supported = [](DType d) { return d.is_floating_point() && !d.is_float8(); };
  MANTISSA_CHECK(supported(da) && supported(db), op,
                 "expected floating dtypes (float64, float32, float16, bfloat16), got {} and {}; "
                 "integer and float8 operands are not supported",
                 da.name(), db.name());
  MANTISSA_CHECK(da == db, op,
                 "expected both operands to have the same dtype, got {} and {} (convert one "
                 "with .to(), or use autocast)",
                 da.name(), db.name());
}

namespace {

void run_bf16_terms_native(const Tensor& a3, const Tensor& b3, Tensor& out, int64_t M, int64_t N,
                           int64_t K3);

// out (..., N) float32 += bias (N) float32, in fp32 (a bf16 copy of the bias would be rounded).
void add_bias_rows_f32(Tensor& out, const Tensor& bias) {
  if (!bias.defined()) return;
  const Tensor bc = bias.contiguous();
  const float* pb = bc.data<float>();
  float* c = out.data<float>();
  const int64_t n = out.size(-1), rows = out.numel() / n;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) c[r * n + j] += pb[j];
}

// a @ b for prepared bf16 operands (any rank, batch dims broadcast) on oneDNN's bf16 matmul with
// an fp32 destination of `out_shape`: the fp32 accumulator, unrounded.
Tensor onednn_bf16_fp32(const Operand& a, const Operand& b, const Shape& out_shape) {
  Tensor out = empty(out_shape, kFloat32);
  const size_t nd = out_shape.size();
  kernels::onednn_matmul(kBFloat16, to_onednn(a, nd), to_onednn(b, nd), nullptr, kBFloat16,
                         out.data_ptr(), out.shape(), kFloat32);
  return out;
}

// The three bf16 terms of a prepared 2-D fp32 operand, concatenated along its inner (K)
// dimension in `order` (a pattern of hi/lo per segment), in the operand's own layout: a row-major
// (M, K) operand gives (M, 3K) rows [t0 | t1 | t2]; a transposed one, stored (K, M), gives (3K, M)
// storage with the terms as row blocks, read transposed. x_hi = bf16(x), x_lo = bf16(x - x_hi),
// both RNE, as kernels/cpu/gemm/bf16_split.h defines them.
Operand bf16_terms_own_layout(const Operand& op, bool k_is_last, const bool (&lo)[3]) {
  const int64_t R = op.shape[0], C = op.shape[1];
  const bool row_major = op.strides[1] == 1;  // else stored transposed: (C, R) rows
  const int64_t rows = row_major ? R : C, len = row_major ? C : R;  // storage rows x len
  const float* src = static_cast<const float*>(op.data);
  // K runs along the storage rows when it is the operand's last dim and the storage is
  // row-major (or its first dim and the storage transposed): terms side by side in each row;
  // otherwise K runs down the storage rows: terms stacked as row blocks.
  const bool side_by_side = k_is_last == row_major;
  Tensor t = empty({3 * rows * len}, kBFloat16);
  uint16_t* out = static_cast<uint16_t*>(t.data_ptr());
  const int64_t out_len = side_by_side ? 3 * len : len;
#pragma omp parallel for schedule(static) if (rows * len > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    thread_local std::vector<float> resid;
    resid.resize(static_cast<size_t>(len));
    uint16_t* seg[3];
    for (int s = 0; s < 3; ++s)
      seg[s] = side_by_side ? out + r * out_len + s * len : out + (s * rows + r) * len;
    const float* x = src + r * len;
    uint16_t* hi = seg[lo[0] ? (lo[1] ? 2 : 1) : 0];  // a segment that holds the hi term
    convert_buffer(x, kFloat32, hi, kBFloat16, len);
    convert_buffer(hi, kBFloat16, resid.data(), kFloat32, len);
    for (int64_t j = 0; j < len; ++j) resid[j] = x[j] - resid[j];
    for (int s = 0; s < 3; ++s) {
      if (seg[s] == hi) continue;
      if (lo[s])
        convert_buffer(resid.data(), kFloat32, seg[s], kBFloat16, len);
      else
        std::copy(hi, hi + len, seg[s]);
    }
  }
  Shape shape = op.shape, strides(2);
  shape[k_is_last ? 1 : 0] *= 3;
  if (row_major) {
    strides = {shape[1], 1};
  } else {
    strides = {1, shape[0]};
  }
  return {t, t.data_ptr(), shape, strides};
}

// "high" on oneDNN's native bf16 matmul for 2-D operands: A as [hi | hi | lo] and B as
// [hi; lo; hi] along K, each built in its operand's own layout (a transposed weight stays
// transposed), one product over 3K with an fp32 destination, the bias added in fp32.
Tensor matmul_bf16x3_onednn(const Tensor& a_in, const Tensor& b_in, const Tensor& bias) {
  const Operand pa = prepare(a_in), pb = prepare(b_in);
  const Operand a3 = bf16_terms_own_layout(pa, true, {false, false, true});
  const Operand b3 = bf16_terms_own_layout(pb, false, {false, true, false});
  Tensor out = onednn_bf16_fp32(a3, b3, {a_in.size(0), b_in.size(1)});
  add_bias_rows_f32(out, bias);
  return out;
}

// "medium" on oneDNN's native bf16 matmul: each operand rounded to bf16 (RNE) in its own layout
// (a transposed weight view stays transposed, so no copy to contiguous first), fp32
// destination, the bias added in fp32.
Tensor matmul_bf16_rounded_onednn(const Tensor& a_in, const Tensor& b_in, const Tensor& bias) {
  const Operand pa = prepare(a_in), pb = prepare(b_in);
  auto narrow = [](const Operand& op) {
    const int64_t n = numel_of(op.shape);
    Tensor t = empty({n}, kBFloat16);
    convert_buffer(op.data, kFloat32, t.data_ptr(), kBFloat16, n);
    return Operand{t, t.data_ptr(), op.shape, op.strides};
  };
  const Operand a16 = narrow(pa), b16 = narrow(pb);
  Shape out_shape = broadcast_shapes(Shape(a_in.shape().begin(), a_in.shape().end() - 2),
                                     Shape(b_in.shape().begin(), b_in.shape().end() - 2), "matmul");
  out_shape.insert(out_shape.end(), {a_in.size(-2), b_in.size(-1)});
  Tensor out = onednn_bf16_fp32(a16, b16, out_shape);
  add_bias_rows_f32(out, bias);
  return out;
}

// The product as float32_matmul_precision() says (never "highest" here): a and b float32,
// packed as bf16 terms (kernels/cpu/gemm/bf16_split.h), then one GEMM with fp32 accumulation
// over the terms -- oneDNN's bf16 matmul with an fp32 destination where the CPU has native bf16
// dot products (AVX-512 BF16, AMX), the native GEMM where it runs bf16 (AVX2 widening the terms
// while packing), else the fp32 GEMM on the bf16 values (same products, same accumulator, no
// speed-up). On oneDNN's native bf16 path, "medium" and 2-D "high" build their terms in the
// operands' own layouts first; batched "high" packs contiguous copies below.
Tensor matmul_bf16_terms(const Tensor& a_in, const Tensor& b_in, const Tensor& bias) {
  static std::once_flag warned;
  std::call_once(warned, [] {
    const std::string w = float32_matmul_emulation_warning();
    if (!w.empty()) warn(w);  // through warn: compare's reports record it
  });
  const int terms = float32_matmul_precision() == Float32MatmulPrecision::kHigh ? 3 : 1;
  if (kernels::onednn_native_bf16()) {
    if (terms == 1) return matmul_bf16_rounded_onednn(a_in, b_in, bias);
    if (a_in.dim() == 2 && b_in.dim() == 2) return matmul_bf16x3_onednn(a_in, b_in, bias);
  }
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape a_shape(a.shape().begin(), a.shape().end() - 1),
      b_shape(b.shape().begin(), b.shape().end() - 2);
  a_shape.push_back(terms * K);
  b_shape.insert(b_shape.end(), {terms * K, N});
  const int64_t rows = a.numel() / K, b_batch = b.numel() / (K * N);
  if (!kernels::gemm_native_supported(kBFloat16)) {
    Tensor a3 = empty(a_shape, kFloat32), b3 = empty(b_shape, kFloat32);
    kernels::pack_bf16_terms_a(a.data<float>(), rows, K, terms, a3.data<float>());
    kernels::pack_bf16_terms_b(b.data<float>(), b_batch, K, N, terms, b3.data<float>());
    return matmul_exact(a3, b3, bias);
  }
  Tensor a3 = empty(a_shape, kBFloat16), b3 = empty(b_shape, kBFloat16);
  kernels::pack_bf16_terms_a(a.data<float>(), rows, K, terms,
                             static_cast<uint16_t*>(a3.data_ptr()));
  kernels::pack_bf16_terms_b(b.data<float>(), b_batch, K, N, terms,
                             static_cast<uint16_t*>(b3.data_ptr()));
  Shape out_shape = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                     Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  out_shape.insert(out_shape.end(), {M, N});
  // oneDNN's bf16 matmul where it has native bf16: AMX tiles where the CPU has them, many times
  // faster than the native AVX-512 BF16 GEMM at the sizes layers have.
  Tensor out;
  if (kernels::onednn_native_bf16()) {
    out = onednn_bf16_fp32(prepare(a3), prepare(b3), out_shape);
  } else {
    out = empty(out_shape, kFloat32);
    run_bf16_terms_native(a3, b3, out, M, N, terms * K);
  }
  add_bias_rows_f32(out, bias);
  return out;
}

// The bf16-term product on the native bf16 GEMM (AVX-512 BF16, or AVX2 widening while it
// packs), fp32 output.
void run_bf16_terms_native(const Tensor& a3, const Tensor& b3, Tensor& out, int64_t M, int64_t N,
                           int64_t K3) {
  std::vector<int64_t> a_off, b_off;
  batch_offsets(a3, b3, out, a_off, b_off);
  kernels::GemmArgs g;
  g.dtype = kBFloat16;
  g.out_dtype = kFloat32;
  g.batch = static_cast<int64_t>(a_off.size());
  g.M = M;
  g.N = N;
  g.K = K3;
  g.a = {a3.data_ptr(), a3.stride(-2), a3.stride(-1), a_off.data()};
  g.b = {b3.data_ptr(), b3.stride(-2), b3.stride(-1), b_off.data()};
  g.c = out.data_ptr();
  kernels::gemm_native(g);
}

}  // namespace

Tensor matmul_bf16_fp32_out(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = a_in.detach(), b = b_in.detach();
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2 && a.dtype() == kBFloat16 && b.dtype() == kBFloat16 &&
                     a.size(1) == b.size(0),
                 "matmul_bf16_fp32_out", "expected bfloat16 (M, K) @ (K, N), got {} {} @ {} {}",
                 a.dtype().name(), shape_str(a.shape()), b.dtype().name(), shape_str(b.shape()));
  const Shape out_shape{a.size(0), b.size(1)};
  if (numel_of(out_shape) == 0) return empty(out_shape, kFloat32);
  if (a.size(1) == 0) return mantissa::detail::zero_unchecked(empty(out_shape, kFloat32));
  if (!kernels::onednn_native_bf16()) return matmul_exact(a.to(kFloat32), b.to(kFloat32));
  return onednn_bf16_fp32(prepare(a), prepare(b), out_shape);
}

Tensor matmul_bf16_scaled(const Tensor& a_in, const Tensor& b_in, float alpha, const Tensor& bias,
                          DType out_dtype) {
  const Tensor a = a_in.detach(), b = b_in.detach();
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2 && a.dtype() == kBFloat16 && b.dtype() == kBFloat16 &&
                     a.size(1) == b.size(0) && a.size(1) > 0,
                 "matmul_bf16_scaled",
                 "expected bfloat16 (M, K) @ (K, N), K > 0, got {} {} @ {} {}", a.dtype().name(),
                 shape_str(a.shape()), b.dtype().name(), shape_str(b.shape()));
  MANTISSA_CHECK(out_dtype == kFloat32 || out_dtype == kBFloat16, "matmul_bf16_scaled",
                 "out_dtype must be float32 or bfloat16, got {}", out_dtype.name());
  if (!kernels::onednn_native_bf16()) return Tensor();  // the caller's own epilogue path
  const Shape out_shape{a.size(0), b.size(1)};
  Tensor out = empty(out_shape, out_dtype);
  if (out.numel() == 0) return out;
  const Operand pa = prepare(a), pb = prepare(b);
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  if (bc.defined()) {
    MANTISSA_CHECK(bc.dim() == 1 && bc.size(0) == out_shape[1] &&
                       (bc.dtype() == kFloat32 || bc.dtype() == kBFloat16),
                   "matmul_bf16_scaled", "bias must be [{}] in float32 or bfloat16, got {} {}",
                   out_shape[1], bc.dtype().name(), shape_str(bc.shape()));
  }
  const auto bop =
      bc.defined() ? bias_operand(bc.data_ptr(), out_shape[1], 2) : kernels::MatmulOperand{};
  kernels::onednn_matmul(kBFloat16, to_onednn(pa, 2), to_onednn(pb, 2),
                         bc.defined() ? &bop : nullptr, bc.defined() ? bc.dtype() : kFloat32,
                         out.data_ptr(), out_shape, out_dtype, alpha);
  return out;
}

Tensor matmul_nograd(const Tensor& a_in, const Tensor& b_in, const Tensor& bias_in) {
  // GPU operands: cuBLASLt, float32 on TF32 tensor cores unless the precision is "highest"
  // (PyTorch's meaning of "high" and "medium" on NVIDIA GPUs).
  if (a_in.is_cuda() || b_in.is_cuda())
    return kernels::cuda::matmul(a_in, b_in, bias_in,
                                 float32_matmul_precision() != Float32MatmulPrecision::kHighest);
  const Tensor a = a_in.detach(), b = b_in.detach();
  if (a.dtype() == kFloat32 && b.dtype() == kFloat32 &&
      float32_matmul_precision() != Float32MatmulPrecision::kHighest && a.size(-1) > 0 &&
      a.numel() > 0 && b.numel() > 0) {
    const Tensor bias = bias_in.defined() ? bias_in.detach() : Tensor();
    const int64_t K = a.size(-1), N = b.size(-1);
    const Shape ba(a.shape().begin(), a.shape().end() - 2);
    const Shape bb(b.shape().begin(), b.shape().end() - 2);
    if (!ba.empty() && numel_of(bb) == 1 && a.is_contiguous()) {
      Shape out_shape = ba;
      out_shape.insert(out_shape.end(), {a.size(-2), N});
      return matmul_bf16_terms(a.view({-1, K}), b.reshape({K, N}), bias).view(out_shape);
    }
    return matmul_bf16_terms(a, b, bias);
  }
  return matmul_exact(a, b, bias_in);
}

Tensor matmul_nograd_widened(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = a_in.detach(), b = b_in.detach();
  const DType dt = a.dtype();
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2 && b.dtype() == dt &&
                     (dt == kBFloat16 || dt == kFloat16) && a.size(1) == b.size(0),
                 "matmul_nograd_widened",
                 "expected bfloat16 or float16 (M, K) @ (K, N), got {} {} @ {} {}", dt.name(),
                 shape_str(a.shape()), b.dtype().name(), shape_str(b.shape()));
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const bool a_transposed = a.stride(-1) != 1 && a.stride(-2) == 1;
  if (!a.is_cuda() && !b.is_cuda() && M > 0 && N > 0 && K > 0 && kernels::gemm_avx2_path(dt) &&
      kernels::use_native_gemm(dt, 1, M, N, K, a_transposed,
                               a.stride(-1) == 1 ? a.stride(-2) : 0)) {
    Tensor out = empty({M, N}, kFloat32);
    run_native(a, b, Tensor(), out, dt);
    return out;
  }
  return matmul_nograd(a, b).to(kFloat32);
}

Tensor matmul_exact(const Tensor& a_in, const Tensor& b_in, const Tensor& bias_in) {
  if (a_in.is_cuda() || b_in.is_cuda()) return kernels::cuda::matmul(a_in, b_in, bias_in, false);
  const Tensor a = a_in.detach(), b = b_in.detach();
  const Tensor bias = bias_in.defined() ? bias_in.detach() : Tensor();
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
    Tensor out = matmul_exact(a.view({-1, K}), b.reshape({K, N}), bias);
    return out.view(out_shape);
  }
  Tensor out = empty(out_shape, a.dtype());
  const int64_t batch = out.numel() / (M * N);
  if (a.dtype() == kFloat64) {
    run_f64(a, b, bias, out);
  } else if (kernels::use_native_gemm(a.dtype(), batch, M, N, K,
                                      a.stride(-1) != 1 && a.stride(-2) == 1,
                                      a.stride(-1) == 1 ? a.stride(-2) : 0)) {
    run_native(a, b, bias, out);
  } else {
    run_onednn(a, b, bias, out);
  }
  return out;
}

}  // namespace detail

namespace {

// Both operands at least 2-D; records one MatmulBackward node.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor out = detail::matmul_nograd(a, b);
  if (!autograd::needs_grad(a, b)) return out;
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  const Shape a_shape = a.shape(), b_shape = b.shape();
  const Tensor a_saved = need_b ? a.detach() : Tensor();
  const Tensor b_saved = need_a ? b.detach() : Tensor();
  const DType dt = a.dtype();
  return autograd::record(
      out, {a, b}, {a_saved, b_saved}, "MatmulBackward", [=](const Tensor& grad) {
        const Tensor g = grad.dtype() == dt ? grad : grad.to(dt);
        Tensor ga, gb;
        if (need_a) ga = sum_to(detail::matmul_nograd(g, b_saved.transpose(-1, -2)), a_shape);
        if (need_b) {
          const int64_t K = a_shape.back(), N = b_shape.back();
          const Shape bb(b_shape.begin(), b_shape.end() - 2);
          const Shape out_batch(g.shape().begin(), g.shape().end() - 2);
          if (numel_of(bb) == 1 && numel_of(out_batch) > 1) {
            // b was broadcast over every batch entry: (K, rows) @ (rows, N) sums them inside one
            // fp32-accumulated GEMM instead of rounding each batch product separately.
            const int64_t rows = numel_of(Shape(g.shape().begin(), g.shape().end() - 1));
            const Tensor a2 = a_saved.reshape({rows, K});
            gb = detail::matmul_nograd(a2.t(), g.reshape({rows, N})).reshape(b_shape);
          } else {
            gb = sum_to(detail::matmul_nograd(a_saved.transpose(-1, -2), g), b_shape);
          }
        }
        return std::vector<Tensor>{ga, gb};
      });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  MANTISSA_PROFILE_OP("matmul");
  MANTISSA_AUTOCAST("matmul", matmul, a, b);
  if (detail::any_complex(a, b)) return detail::complex_matmul(a, b);
  MANTISSA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul",
                 "both arguments need at least 1 dimension, got shapes {} and {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  detail::check_matmul_dtypes("matmul", a, b);
  const int64_t ka = a.size(-1);
  const int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  MANTISSA_CHECK(ka == kb, "matmul", "shapes {} and {} cannot be multiplied ({} != {})",
                 shape_str(a.shape()), shape_str(b.shape()), ka, kb);
  // Batch dims (all but the matrix dims) must broadcast, aligned from the right.
  const int64_t na = std::max<int64_t>(a.dim() - 2, 0), nb = std::max<int64_t>(b.dim() - 2, 0);
  for (int64_t i = 1; i <= std::min(na, nb); ++i) {
    const int64_t sa = a.size(na - i), sb = b.size(nb - i);
    MANTISSA_CHECK(sa == sb || sa == 1 || sb == 1, "matmul",
                   "batch dimensions of shapes {} and {} do not broadcast ({} vs {})",
                   shape_str(a.shape()), shape_str(b.shape()), sa, sb);
  }
  // 1-D operands are promoted to matrices through differentiable views and squeezed back.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor out = matmul_nd(a2, b2);
  if (a.dim() == 1 && b.dim() == 1) return out.reshape({});
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace mantissa
