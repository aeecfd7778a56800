// The engines of products with a 4-bit weight (four_bit_products.h).
#include "gemm/four_bit_products.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/inplace.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cpu/onednn/tiled_b_pack.h"
#include "kernels/cpu/quant/four_bit.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/core/error.h"
#include "mantissa/core/quantized_tensor.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/quant/four_bit_cuda.h"
#endif

namespace mantissa::gemm::detail {

kernels::quant::FourBitMatrix four_bit_matrix(const FourBitWeight& w) {
  kernels::quant::FourBitMatrix m;
  m.packed = w.packed.data<uint8_t>();
  m.absmax = w.absmax.data<float>();
  m.rows = w.shape[0];
  m.cols = w.shape[1];
  m.blocksize = w.blocksize;
  m.format = w.format;
  return m;
}

namespace {

using kernels::Bf16TiledB;

// x (rows, k) @ op(W) in x's dtype, W decoded block by block into the GEMM's panels to exactly
// the values dequantize(w, x.dtype()) holds. transpose_w: x @ W^T (the forward; k = in
// features), else x @ W (the input gradient; k = out features).
Tensor fused_product(const Tensor& x, const FourBitWeight& w, bool transpose_w,
                     const Tensor& bias) {
  const int64_t out_f = w.shape[0], in_f = w.shape[1];
  const Tensor xc = x.contiguous();
  const int64_t rows = xc.size(0), K = xc.size(1);
  const int64_t N = transpose_w ? out_f : in_f;
  Tensor y = empty({rows, N}, xc.dtype());
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  kernels::GemmFourBit fb;
  fb.packed = w.packed.data<uint8_t>();
  fb.absmax = w.absmax.data<float>();
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

// W's flat elements [first, first + count) decoded to `dtype` (float32, bfloat16 or float16):
// the values quant::dequantize gives.
void decode_range(const FourBitWeight& w, int64_t first, int64_t count, DType dtype, void* out) {
  const uint8_t* packed = w.packed.data<uint8_t>();
  const float* absmax = w.absmax.data<float>();
  if (dtype == kFloat32) {
    kernels::quant::dequantize_4bit(packed, absmax, first, count, w.blocksize, w.format,
                                    static_cast<float*>(out));
    return;
  }
  kernels::quant::dequantize_4bit_16(packed, absmax, first, count, w.blocksize, w.format,
                                     dtype == kBFloat16, static_cast<uint16_t*>(out));
}

// Below this many decoded elements a decode runs on one thread.
constexpr int64_t kSerialDecodeBelow = int64_t{1} << 16;

// W[r0, r0 + n) x [c0, c0 + nc), dequantized to `dtype` into out (rows nc elements apart), on
// this thread: whole rows in one range, else a range per row.
void decode_rows(const FourBitWeight& w, int64_t r0, int64_t n, int64_t c0, int64_t nc, DType dtype,
                 void* out) {
  const int64_t in_f = w.shape[1];
  char* o = static_cast<char*>(out);
  if (nc == in_f) {
    decode_range(w, r0 * in_f, n * in_f, dtype, o);
    return;
  }
  const int64_t row_bytes = nc * static_cast<int64_t>(dtype.itemsize());
  for (int64_t i = 0; i < n; ++i)
    decode_range(w, (r0 + i) * in_f + c0, nc, dtype, o + i * row_bytes);
}

// decode_rows with the rows split over the threads.
void dequantize_block(const FourBitWeight& w, int64_t r0, int64_t n, int64_t c0, int64_t nc,
                      DType dtype, void* out) {
  const int64_t row_bytes = nc * static_cast<int64_t>(dtype.itemsize());
  char* o = static_cast<char*>(out);
  const int64_t parts = n * nc >= kSerialDecodeBelow ? std::max(1, omp_get_max_threads()) : 1;
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t a = n * p / parts, b = n * (p + 1) / parts;
    decode_rows(w, r0 + a, b - a, c0, nc, dtype, o + a * row_bytes);
  }
}

// W[r0, r1) x [c0, c0 + nc) dequantized into the tiles of `layout`, rows_per_task rows of W per
// task over the threads: each task decodes its rows into a buffer of its thread, and
// `pack(rows, n, task, tiles)` writes them (n of them real, the rest of the task's tiles
// padding).
template <typename Pack>
Tensor dequantize_into_tiles(const FourBitWeight& w, const Bf16TiledB& layout, int64_t r0,
                             int64_t r1, int64_t c0, int64_t nc, int64_t rows_per_task,
                             int64_t tasks, Pack pack) {
  Tensor tiles = empty({layout.elements}, kBFloat16);
  uint16_t* b = static_cast<uint16_t*>(tiles.data_ptr());
#pragma omp parallel
  {
    std::vector<uint16_t> rows(static_cast<size_t>(rows_per_task * nc));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t first = r0 + t * rows_per_task;
      const int64_t n = std::clamp<int64_t>(r1 - first, 0, rows_per_task);
      decode_rows(w, first, n, c0, nc, kBFloat16, rows.data());
      pack(rows.data(), n, t, b);
    }
  }
  return tiles;
}

// y[:, r0, r0 + n) = x @ W[r0, r0 + n)^T (+ bias) in bf16, that slice of W decoded straight into
// oneDNN's tiled layout for B = W^T (64 rows of W, one n tile, per task, transposed into the
// tiles by k pairs). False where oneDNN wants another layout for this product.
bool forward_chunk_tiled(const Tensor& x, const FourBitWeight& w, const Tensor& bias, int64_t r0,
                         int64_t n, Tensor& y) {
  const int64_t m = x.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, in_f, n);
  if (!layout) return false;
  const Tensor tiles = dequantize_into_tiles(
      w, *layout, r0, r0 + n, 0, in_f, Bf16TiledB::kTileN, layout->n_tiles,
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
bool input_grad_chunk_tiled(const Tensor& g, const FourBitWeight& w, int64_t c0, int64_t nc,
                            Tensor& dx) {
  const int64_t m = g.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, out_f, nc);
  if (!layout) return false;
  const Tensor tiles =
      dequantize_into_tiles(w, *layout, 0, out_f, c0, nc, Bf16TiledB::kTileK, layout->k_tiles,
                            [&](const uint16_t* rows, int64_t rn, int64_t kt, uint16_t* b) {
                              kernels::pack_bf16_k_tile(rows, nc, rn, nc, *layout, kt, b);
                            });
  Tensor part = nc == in_f ? dx : empty({m, nc}, kBFloat16);  // as in forward_chunk_tiled
  kernels::onednn_matmul_bf16_tiled_b(g.data_ptr(), tiles.data_ptr(), m, out_f, nc, part.data_ptr(),
                                      kBFloat16);
  if (nc < in_f) mantissa::detail::copy_unchecked(dx.slice(1, c0, c0 + nc), part);
  return true;
}

int64_t g_chunk_bytes = int64_t{1} << 20;

}  // namespace

Tensor four_bit_fused(const Tensor& x, const FourBitWeight& w, bool transpose_w,
                      const Tensor& bias) {
  return fused_product(x, w, transpose_w, bias);
}

Tensor four_bit_amx_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias) {
  Tensor y = empty({x.size(0), w.shape[0]}, kBFloat16);
  kernels::quant::four_bit_forward_amx(
      four_bit_matrix(w), static_cast<const uint16_t*>(x.data_ptr()), x.size(0),
      bias.defined() ? static_cast<const uint16_t*>(bias.data_ptr()) : nullptr,
      static_cast<uint16_t*>(y.data_ptr()));
  return y;
}

Tensor four_bit_amx_input_grad(const Tensor& g, const FourBitWeight& w) {
  Tensor dx = empty({g.size(0), w.shape[1]}, kBFloat16);
  kernels::quant::four_bit_input_grad_amx(four_bit_matrix(w),
                                          static_cast<const uint16_t*>(g.data_ptr()), g.size(0),
                                          static_cast<uint16_t*>(dx.data_ptr()));
  return dx;
}

Tensor four_bit_chunked_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias,
                                bool tiled, Float32Products f32) {
  const DType cd = x.dtype();
  const int64_t m = x.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const int64_t rows = chunk_lines(out_f, in_f, cd);
  Tensor y;  // allocated by the first chunk that does not return its product as the whole
  for (int64_t r0 = 0; r0 < out_f; r0 += rows) {
    const int64_t n = std::min(rows, out_f - r0);
    if (!y.defined() && (tiled || n < out_f)) y = empty({m, out_f}, cd);
    if (tiled && forward_chunk_tiled(x, w, bias, r0, n, y)) continue;
    Tensor wc = empty({n, in_f}, cd);
    dequantize_block(w, r0, n, 0, in_f, cd, wc.data_ptr());
    Epilogue e;
    e.bias = bias.defined() ? bias.slice(0, r0, r0 + n) : Tensor();
    e.float32 = f32;
    const Tensor part = gemm(dense(x), dense(wc).t(), e);
    if (n == out_f) return part;
    mantissa::detail::copy_unchecked(y.slice(1, r0, r0 + n), part);
  }
  return y;
}

Tensor four_bit_chunked_input_grad(const Tensor& g, const FourBitWeight& w, bool tiled,
                                   Float32Products f32) {
  const DType cd = g.dtype();
  const int64_t m = g.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const int64_t cols = chunk_lines(in_f, out_f, cd);
  Tensor dx;  // as y in four_bit_chunked_forward
  for (int64_t c0 = 0; c0 < in_f; c0 += cols) {
    const int64_t nc = std::min(cols, in_f - c0);
    if (!dx.defined() && (tiled || nc < in_f)) dx = empty({m, in_f}, cd);
    if (tiled && input_grad_chunk_tiled(g, w, c0, nc, dx)) continue;
    Tensor wc = empty({out_f, nc}, cd);
    dequantize_block(w, 0, out_f, c0, nc, cd, wc.data_ptr());
    Epilogue e;
    e.float32 = f32;
    const Tensor part = gemm(dense(g), dense(wc), e);
    if (nc == in_f) return part;
    mantissa::detail::copy_unchecked(dx.slice(1, c0, c0 + nc), part);
  }
  return dx;
}

// W decoded in full into x's dtype on the GPU, then one cuBLAS product with the bias fused: the
// decode costs a fraction of the product there, and the decoded copy is freed right after.
Tensor four_bit_on_gpu(const Tensor& x, const Operand& w, const Tensor& bias, Float32Products f32) {
#if MANTISSA_HAS_CUDA
  QuantizedTensor q;
  q.format = *w.format;
  q.shape = w.shape;
  q.blocksize = w.block;
  q.data = w.data;
  const Tensor wd =
      kernels::gpu::dequantize_4bit(q, q.format, w.scales.to(w.data.device()), x.dtype());
  Epilogue e;
  e.bias = bias;
  e.float32 = f32;
  return gemm(dense(x), w.transposed ? dense(wd).t() : dense(wd), e);
#else
  (void)x, (void)w, (void)bias, (void)f32;
  fail("Linear4bit", "this build has no CUDA backend");
#endif
}

}  // namespace mantissa::gemm::detail

namespace mantissa::gemm {

int64_t four_bit_chunk_bytes() { return detail::g_chunk_bytes; }

void set_four_bit_chunk_bytes(int64_t bytes) {
  MANTISSA_CHECK(bytes > 0, "Linear4bit", "the chunk budget must be positive, got {}", bytes);
  detail::g_chunk_bytes = bytes;
}

}  // namespace mantissa::gemm
