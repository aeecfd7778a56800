// The engines of dense products (dense_products.h): the float64 kernel, the native
// AVX2/AVX-512 GEMM, oneDNN, and the bf16-term products of the float32 settings "high" and
// "medium". Each runs the product it is given; src/gemm/dispatch.cpp chooses which runs.
#include "gemm/dense_products.h"

#include <algorithm>
#include <vector>

#include "core/strided_loops.h"
#include "kernels/cpu/gemm/bf16_split.h"
#include "kernels/cpu/gemm/dense_gemv.h"
#include "kernels/cpu/gemm/gemm_f64.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"

namespace mantissa::gemm::detail {
namespace {

// W's elements from which a product of few rows takes the few-rows kernel: a smaller W sits in
// cache, where oneDNN's product is as fast, and its call costs less than the threads' start.
constexpr int64_t kFewRowsMinWeight = int64_t{1} << 16;
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
struct StridedOperand {
  Tensor keep;
  const void* data;
  Shape shape;
  Shape strides;
};

// Reads x in place when it is contiguous or "transposed-contiguous" (dense once its last two
// dims are swapped); strides of size-1 dims are normalised so equal layouts share a cached
// primitive. Anything else is copied to contiguous.
StridedOperand prepare(const Tensor& x) {
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
StridedOperand widen(const StridedOperand& op, DType dt) {
  const int64_t n = numel_of(op.shape);
  Tensor w = empty({n}, kFloat32);
  convert_buffer(op.data, dt, w.data<float>(), kFloat32, n);
  return {w, w.data_ptr(), op.shape, op.strides};
}

// The operand as oneDNN sees it, padded with leading size-1 dims to rank nd.
kernels::MatmulOperand to_onednn(const StridedOperand& op, size_t nd) {
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
  StridedOperand pa = prepare(a), pb = prepare(b);
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
Tensor onednn_bf16_fp32(const StridedOperand& a, const StridedOperand& b, const Shape& out_shape) {
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
StridedOperand bf16_terms_own_layout(const StridedOperand& op, bool k_is_last,
                                     const bool (&lo)[3]) {
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
  const StridedOperand pa = prepare(a_in), pb = prepare(b_in);
  const StridedOperand a3 = bf16_terms_own_layout(pa, true, {false, false, true});
  const StridedOperand b3 = bf16_terms_own_layout(pb, false, {false, true, false});
  Tensor out = onednn_bf16_fp32(a3, b3, {a_in.size(0), b_in.size(1)});
  add_bias_rows_f32(out, bias);
  return out;
}

// "medium" on oneDNN's native bf16 matmul: each operand rounded to bf16 (RNE) in its own layout
// (a transposed weight view stays transposed, so no copy to contiguous first), fp32
// destination, the bias added in fp32.
Tensor matmul_bf16_rounded_onednn(const Tensor& a_in, const Tensor& b_in, const Tensor& bias) {
  const StridedOperand pa = prepare(a_in), pb = prepare(b_in);
  auto narrow = [](const StridedOperand& op) {
    const int64_t n = numel_of(op.shape);
    Tensor t = empty({n}, kBFloat16);
    convert_buffer(op.data, kFloat32, t.data_ptr(), kBFloat16, n);
    return StridedOperand{t, t.data_ptr(), op.shape, op.strides};
  };
  const StridedOperand a16 = narrow(pa), b16 = narrow(pb);
  Shape out_shape = broadcast_shapes(Shape(a_in.shape().begin(), a_in.shape().end() - 2),
                                     Shape(b_in.shape().begin(), b_in.shape().end() - 2), "matmul");
  out_shape.insert(out_shape.end(), {a_in.size(-2), b_in.size(-1)});
  Tensor out = onednn_bf16_fp32(a16, b16, out_shape);
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

void f64_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out) {
  run_f64(a, b, bias, out);
}

void native_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                    DType round_to) {
  run_native(a, b, bias, out, round_to);
}

void onednn_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out) {
  run_onednn(a, b, bias, out);
}

bool few_rows_product_fits(const Tensor& a, const Tensor& b, int64_t batch) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  return batch == 1 && a.dtype() == kFloat32 && b.dtype() == kFloat32 && a.dim() == 2 &&
         b.dim() == 2 && M <= kernels::kDenseGemvMaxRows && a.stride(-1) == 1 &&
         b.stride(-2) == 1 && b.stride(-1) >= K && N * K >= kFewRowsMinWeight &&
         simd_level() >= SimdLevel::kAvx2;
}

void few_rows_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Tensor bias_f = bias.defined() ? bias.to(kFloat32).contiguous() : Tensor();
  kernels::dense_gemv_f32(b.data<float>(), b.stride(-1), N, K, a.data<float>(), a.stride(-2), M,
                          bias_f.defined() ? bias_f.data<float>() : nullptr, out.data<float>(), N);
}

Tensor bf16_rounded_onednn(const Tensor& a, const Tensor& b, const Tensor& bias) {
  return matmul_bf16_rounded_onednn(a, b, bias);
}

Tensor bf16x3_onednn(const Tensor& a, const Tensor& b, const Tensor& bias) {
  return matmul_bf16x3_onednn(a, b, bias);
}

Bf16Terms bf16_terms(const Tensor& a_in, const Tensor& b_in, int terms, DType as) {
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t K = a.size(-1), N = b.size(-1);
  Shape a_shape(a.shape().begin(), a.shape().end() - 1),
      b_shape(b.shape().begin(), b.shape().end() - 2);
  a_shape.push_back(terms * K);
  b_shape.insert(b_shape.end(), {terms * K, N});
  const int64_t rows = a.numel() / K, b_batch = b.numel() / (K * N);
  Bf16Terms t{empty(a_shape, as), empty(b_shape, as)};
  if (as == kFloat32) {
    kernels::pack_bf16_terms_a(a.data<float>(), rows, K, terms, t.a.data<float>());
    kernels::pack_bf16_terms_b(b.data<float>(), b_batch, K, N, terms, t.b.data<float>());
  } else {
    kernels::pack_bf16_terms_a(a.data<float>(), rows, K, terms,
                               static_cast<uint16_t*>(t.a.data_ptr()));
    kernels::pack_bf16_terms_b(b.data<float>(), b_batch, K, N, terms,
                               static_cast<uint16_t*>(t.b.data_ptr()));
  }
  return t;
}

Tensor onednn_bf16_accumulator(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  return onednn_bf16_fp32(prepare(a), prepare(b), out_shape);
}

Tensor native_bf16_accumulator(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  Tensor out = empty(out_shape, kFloat32);
  run_bf16_terms_native(a, b, out, out_shape[out_shape.size() - 2], out_shape.back(), a.size(-1));
  return out;
}

void add_bias_f32(Tensor& out, const Tensor& bias) { add_bias_rows_f32(out, bias); }

Tensor onednn_bf16_scaled(const Tensor& a, const Tensor& b, float alpha, const Tensor& bias,
                          DType out_dtype) {
  const Shape out_shape{a.size(0), b.size(1)};
  Tensor out = empty(out_shape, out_dtype);
  if (out.numel() == 0) return out;
  const StridedOperand pa = prepare(a), pb = prepare(b);
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const auto bop =
      bc.defined() ? bias_operand(bc.data_ptr(), out_shape[1], 2) : kernels::MatmulOperand{};
  kernels::onednn_matmul(kBFloat16, to_onednn(pa, 2), to_onednn(pb, 2),
                         bc.defined() ? &bop : nullptr, bc.defined() ? bc.dtype() : kFloat32,
                         out.data_ptr(), out_shape, out_dtype, alpha);
  return out;
}

}  // namespace mantissa::gemm::detail
