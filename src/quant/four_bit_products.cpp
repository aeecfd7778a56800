// The 4-bit Linear's forward and input-gradient products (four_bit_products.h).
#include "quant/four_bit_products.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/inplace.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cpu/onednn/tiled_b_pack.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/core/error.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/quantize.h"
#include "ops/matmul_impl.h"

namespace mantissa::quant {
namespace {

using kernels::Bf16TiledB;

// Whether the 4-bit weight is decoded inside the AVX2 GEMM's packing (no dequantised copy):
// on the AVX2 level unless MANTISSA_GEMM=onednn asks for the library GEMM.
bool fused_four_bit_gemm() {
  return kernels::gemm_native_lowbit_supported() &&
         kernels::gemm_backend() != kernels::GemmBackend::kOnednn;
}

// x (rows, k) @ op(W) in x's dtype, W decoded block by block into the GEMM's panels to exactly
// the values dequantize(w, x.dtype()) holds. transpose_w: x @ W^T (the forward; k = in
// features), else x @ W (the input gradient; k = out features).
Tensor four_bit_matmul(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                       bool transpose_w, const Tensor& bias) {
  const int64_t out_f = w.shape[0], in_f = w.shape[1];
  const Tensor xc = x.contiguous();
  const int64_t rows = xc.size(0), K = xc.size(1);
  const int64_t N = transpose_w ? out_f : in_f;
  Tensor y = empty({rows, N}, xc.dtype());
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  kernels::GemmFourBit fb;
  fb.packed = w.data.data<uint8_t>();
  fb.absmax = absmax.data<float>();
  fb.table = kernels::quant::four_bit_codebook(w.format).dequant_values.data();
  fb.blocksize = w.blocksize;
  fb.round_to = xc.dtype();
  kernels::GemmArgs g;
  g.out_dtype = xc.dtype();
  g.M = rows;
  g.N = N;
  g.K = K;
  g.a = {xc.data_ptr(), K, 1, nullptr};
  // B(k, n) is W[n, k] (forward) or W[k, n] (input gradient), flat row-major in W.
  g.b = {nullptr, transpose_w ? 1 : in_f, transpose_w ? in_f : 1, nullptr};
  g.bias = bc.defined() ? bc.data_ptr() : nullptr;
  g.c = y.data_ptr();
  kernels::GemmLowbit lb;
  lb.a_dtype = xc.dtype();
  lb.b_four_bit = &fb;
  lb.bias_dtype = bc.defined() ? bc.dtype() : kFloat32;
  kernels::gemm_native_lowbit(g, lb);
  return y;
}

// Whether a product (forward or input gradient) runs on mantissa's AMX kernels, W decoded a
// few rows at a time straight into tiles: bf16 on a CPU with AMX, oneDNN allowed
// (MANTISSA_GEMM=native keeps the native GEMM), few input rows. Per thread, no more than 64 of
// W's rows (forward), or 256 rows of the thread's columns (input gradient), exist decoded.
bool amx_product(DType cd, int64_t rows) {
  return cd == kBFloat16 && rows > 0 && rows <= kernels::quant::kFourBitAmxMaxRows &&
         kernels::gemm_backend() != kernels::GemmBackend::kNative &&
         kernels::quant::amx_bf16_usable();
}

kernels::quant::FourBitMatrix four_bit_matrix(const QuantizedTensor& w, const Tensor& absmax) {
  kernels::quant::FourBitMatrix m;
  m.packed = w.data.data<uint8_t>();
  m.absmax = absmax.data<float>();
  m.rows = w.shape[0];
  m.cols = w.shape[1];
  m.blocksize = w.blocksize;
  m.format = w.format;
  return m;
}

// Whether a chunk's product runs on oneDNN with its B operand decoded straight into oneDNN's
// tiled layout: bf16 on a CPU with native bf16 (AMX or AVX-512 BF16), oneDNN allowed (not
// MANTISSA_GEMM=native). oneDNN then skips the repacking of B it does on every call for a
// plain operand.
bool tiled_chunks(DType cd) {
  return cd == kBFloat16 && has_native_bf16() &&
         kernels::gemm_backend() != kernels::GemmBackend::kNative;
}

// The forward takes the tiled layout from this many input rows. Its transposing pack costs about
// what the GEMM saves, so it pays where the product is long: bench_linear4bit on the AMX Xeon
// (before its AMX kernels took the small batches), NF4 / bf16 speed with and without it, GPT
// shapes at 2048 rows 1.01-1.07 against 0.96-0.99, the MLP's at 64 and 256 rows 0.64-0.73 against
// 0.69-0.87. On AVX-512 BF16 without AMX (the Zen 4 stand-in) it made no difference below.
constexpr int64_t kTiledForwardMinRows = 1024;

// Chunks are whole tiles of the tiled layout: 64 columns of the chunk's product (rows of W in
// the forward, columns of W in the input gradient).
constexpr int64_t kChunkAlign = Bf16TiledB::kTileN;

// Lines of W (rows or columns) per chunk when one line holds `line` elements: as many as the
// budget holds, a multiple of kChunkAlign, at least one multiple, at most all `lines`.
int64_t chunk_lines(int64_t lines, int64_t line, DType dtype) {
  const int64_t line_bytes = std::max<int64_t>(1, line * static_cast<int64_t>(dtype.itemsize()));
  const int64_t fit = four_bit_chunk_bytes() / line_bytes / kChunkAlign * kChunkAlign;
  return std::min(lines, std::max(kChunkAlign, fit));
}

// Below this many decoded elements a decode runs on one thread.
constexpr int64_t kSerialDecodeBelow = int64_t{1} << 16;

// W[r0, r0 + n) x [c0, c0 + nc), dequantized to `dtype` into out (rows nc elements apart), on
// this thread: whole rows in one range, else a range per row.
void decode_rows(const QuantizedTensor& w, const float* absmax, int64_t r0, int64_t n, int64_t c0,
                 int64_t nc, DType dtype, void* out) {
  const int64_t in_f = w.shape[1];
  char* o = static_cast<char*>(out);
  if (nc == in_f) {
    dequantize_range(w, absmax, r0 * in_f, n * in_f, dtype, o);
    return;
  }
  const int64_t row_bytes = nc * static_cast<int64_t>(dtype.itemsize());
  for (int64_t i = 0; i < n; ++i)
    dequantize_range(w, absmax, (r0 + i) * in_f + c0, nc, dtype, o + i * row_bytes);
}

// decode_rows with the rows split over the threads.
void dequantize_block(const QuantizedTensor& w, const float* absmax, int64_t r0, int64_t n,
                      int64_t c0, int64_t nc, DType dtype, void* out) {
  const int64_t row_bytes = nc * static_cast<int64_t>(dtype.itemsize());
  char* o = static_cast<char*>(out);
  const int64_t parts = n * nc >= kSerialDecodeBelow ? std::max(1, omp_get_max_threads()) : 1;
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t a = n * p / parts, b = n * (p + 1) / parts;
    decode_rows(w, absmax, r0 + a, b - a, c0, nc, dtype, o + a * row_bytes);
  }
}

// W[r0, r1) x [c0, c0 + nc) dequantized into the tiles of `layout`, rows_per_task rows of W per
// task over the threads: each task decodes its rows into a buffer of its thread, and
// `pack(rows, n, task, tiles)` writes them (n of them real, the rest of the task's tiles
// padding).
template <typename Pack>
Tensor dequantize_into_tiles(const QuantizedTensor& w, const Tensor& absmax,
                             const Bf16TiledB& layout, int64_t r0, int64_t r1, int64_t c0,
                             int64_t nc, int64_t rows_per_task, int64_t tasks, Pack pack) {
  Tensor tiles = empty({layout.elements}, kBFloat16);
  uint16_t* b = static_cast<uint16_t*>(tiles.data_ptr());
  const float* am = absmax.data<float>();
#pragma omp parallel
  {
    std::vector<uint16_t> rows(static_cast<size_t>(rows_per_task * nc));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t first = r0 + t * rows_per_task;
      const int64_t n = std::clamp<int64_t>(r1 - first, 0, rows_per_task);
      decode_rows(w, am, first, n, c0, nc, kBFloat16, rows.data());
      pack(rows.data(), n, t, b);
    }
  }
  return tiles;
}

// y[:, r0, r0 + n) = x @ W[r0, r0 + n)^T (+ bias) in bf16, that slice of W decoded straight into
// oneDNN's tiled layout for B = W^T (64 rows of W, one n tile, per task, transposed into the
// tiles by k pairs). False where oneDNN wants another layout for this product.
bool forward_chunk_tiled(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                         const Tensor& bias, int64_t r0, int64_t n, Tensor& y) {
  const int64_t m = x.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, in_f, n);
  if (!layout) return false;
  const Tensor tiles = dequantize_into_tiles(
      w, absmax, *layout, r0, r0 + n, 0, in_f, Bf16TiledB::kTileN, layout->n_tiles,
      [&](const uint16_t* rows, int64_t rn, int64_t nt, uint16_t* b) {
        kernels::pack_bf16_n_tile_transposed(rows, in_f, rn, in_f, *layout, nt, b);
      });
  const uint16_t* b = bias.defined() ? static_cast<const uint16_t*>(bias.data_ptr()) + r0 : nullptr;
  // oneDNN (2.x) multiplies into a strided destination with its slow gemm kernel: a dense one
  // and a copy unless the chunk is the whole weight.
  Tensor part = n == out_f ? y : empty({m, n}, kBFloat16);
  kernels::onednn_matmul_bf16_tiled_b(x.data_ptr(), tiles.data_ptr(), m, in_f, n, part.data_ptr(),
                                      kBFloat16, b);
  if (n < out_f) mantissa::detail::copy_unchecked(y.slice(1, r0, r0 + n), part);
  return true;
}

// dx[:, c0, c0 + nc) = g @ W[:, c0, c0 + nc) in bf16, those columns of W decoded straight into
// oneDNN's tiled layout for B (32 rows of W, one k tile, per task). False where oneDNN wants
// another layout for this product.
bool input_grad_chunk_tiled(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax,
                            int64_t c0, int64_t nc, Tensor& dx) {
  const int64_t m = g.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, out_f, nc);
  if (!layout) return false;
  const Tensor tiles = dequantize_into_tiles(
      w, absmax, *layout, 0, out_f, c0, nc, Bf16TiledB::kTileK, layout->k_tiles,
      [&](const uint16_t* rows, int64_t rn, int64_t kt, uint16_t* b) {
        kernels::pack_bf16_k_tile(rows, nc, rn, nc, *layout, kt, b);
      });
  Tensor part = nc == in_f ? dx : empty({m, nc}, kBFloat16);  // as in forward_chunk_tiled
  kernels::onednn_matmul_bf16_tiled_b(g.data_ptr(), tiles.data_ptr(), m, out_f, nc, part.data_ptr(),
                                      kBFloat16);
  if (nc < in_f) mantissa::detail::copy_unchecked(dx.slice(1, c0, c0 + nc), part);
  return true;
}

// The forward with W decoded a chunk of its rows (the product's output columns) at a time.
// Every output element is summed over the same K, in the same GEMM, as in one product with the
// whole weight.
Tensor chunked_forward(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                       const Tensor& bias) {
  const DType cd = x.dtype();
  const int64_t m = x.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const int64_t rows = chunk_lines(out_f, in_f, cd);
  const bool tiled = tiled_chunks(cd) && m >= kTiledForwardMinRows;
  Tensor y;  // allocated by the first chunk that does not return its product as the whole
  for (int64_t r0 = 0; r0 < out_f; r0 += rows) {
    const int64_t n = std::min(rows, out_f - r0);
    if (!y.defined() && (tiled || n < out_f)) y = empty({m, out_f}, cd);
    if (tiled && forward_chunk_tiled(x, w, absmax, bias, r0, n, y)) continue;
    Tensor wc = empty({n, in_f}, cd);
    dequantize_block(w, absmax.data<float>(), r0, n, 0, in_f, cd, wc.data_ptr());
    const Tensor bc = bias.defined() ? bias.slice(0, r0, r0 + n) : Tensor();
    const Tensor part = mantissa::detail::matmul_nograd(x, wc.t(), bc);
    if (n == out_f) return part;
    mantissa::detail::copy_unchecked(y.slice(1, r0, r0 + n), part);
  }
  return y;
}

// The input gradient with W decoded a chunk of its columns (the product's output columns) at a
// time; as for the forward, each output element is one sum over all of W's rows.
Tensor chunked_input_grad(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax) {
  const DType cd = g.dtype();
  const int64_t m = g.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const int64_t cols = chunk_lines(in_f, out_f, cd);
  const bool tiled = tiled_chunks(cd);
  Tensor dx;  // as y in chunked_forward
  for (int64_t c0 = 0; c0 < in_f; c0 += cols) {
    const int64_t nc = std::min(cols, in_f - c0);
    if (!dx.defined() && (tiled || nc < in_f)) dx = empty({m, in_f}, cd);
    if (tiled && input_grad_chunk_tiled(g, w, absmax, c0, nc, dx)) continue;
    Tensor wc = empty({out_f, nc}, cd);
    dequantize_block(w, absmax.data<float>(), 0, out_f, c0, nc, cd, wc.data_ptr());
    const Tensor part = mantissa::detail::matmul_nograd(g, wc);
    if (nc == in_f) return part;
    mantissa::detail::copy_unchecked(dx.slice(1, c0, c0 + nc), part);
  }
  return dx;
}

int64_t g_chunk_bytes = int64_t{1} << 20;

}  // namespace

int64_t four_bit_chunk_bytes() { return g_chunk_bytes; }
void set_four_bit_chunk_bytes(int64_t bytes) {
  MANTISSA_CHECK(bytes > 0, "Linear4bit", "the chunk budget must be positive, got {}", bytes);
  g_chunk_bytes = bytes;
}

namespace detail {

Tensor four_bit_forward(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                        const Tensor& bias) {
  // On a GPU: W decoded in full into x's dtype, then one cuBLAS product with the bias fused.
  if (x.is_cuda())
    return mantissa::detail::matmul_nograd(x, dequantize(w, x.dtype(), absmax).t(), bias);
  const Tensor xc = x.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  if (fused_four_bit_gemm()) return four_bit_matmul(xc, w, absmax, true, bc);
  if (amx_product(xc.dtype(), xc.size(0))) {
    Tensor y = empty({xc.size(0), w.shape[0]}, kBFloat16);
    kernels::quant::four_bit_forward_amx(
        four_bit_matrix(w, absmax), static_cast<const uint16_t*>(xc.data_ptr()), xc.size(0),
        bc.defined() ? static_cast<const uint16_t*>(bc.data_ptr()) : nullptr,
        static_cast<uint16_t*>(y.data_ptr()));
    return y;
  }
  return chunked_forward(xc, w, absmax, bc);
}

Tensor four_bit_input_grad(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax) {
  if (g.is_cuda()) return mantissa::detail::matmul_nograd(g, dequantize(w, g.dtype(), absmax));
  const Tensor gc = g.contiguous();
  if (fused_four_bit_gemm()) return four_bit_matmul(gc, w, absmax, false, Tensor());
  if (amx_product(gc.dtype(), gc.size(0))) {
    Tensor dx = empty({gc.size(0), w.shape[1]}, kBFloat16);
    kernels::quant::four_bit_input_grad_amx(four_bit_matrix(w, absmax),
                                            static_cast<const uint16_t*>(gc.data_ptr()), gc.size(0),
                                            static_cast<uint16_t*>(dx.data_ptr()));
    return dx;
  }
  return chunked_input_grad(gc, w, absmax);
}

}  // namespace detail
}  // namespace mantissa::quant
