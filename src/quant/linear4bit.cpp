// Linear4bit: construction (drawn-and-quantized, from a Linear, or from a quantized weight),
// the bitsandbytes state-dict layout, and the forward/backward node.
#include "mantissa/quant/linear4bit.h"
#include "mantissa/core/managed_precision.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cpu/onednn/tiled_b_pack.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_tables.h"
#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/default_dtype.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/quant/bnb_format.h"
#include "mantissa/quant/quantize.h"
#include "ops/matmul_impl.h"
#include "quant/layer_output_dtype.h"

namespace mantissa::quant {
namespace {

constexpr const char* kWhere = "Linear4bit";

void check_options(const Linear4bitOptions& o) {
  MANTISSA_CHECK(o.format == QuantFormat::kNf4 || o.format == QuantFormat::kFp4, kWhere,
                 "format must be nf4 or fp4, got {}", quant_format_name(o.format));
  const DType c = o.compute_dtype;
  MANTISSA_CHECK(c == kBFloat16 || c == kFloat16 || c == kFloat32, kWhere,
                 "compute_dtype must be bfloat16, float16 or float32, got {}", c.name());
}

FourBitOptions four_bit_options(const Linear4bitOptions& o) {
  return FourBitOptions{o.format, o.blocksize, o.double_quant};
}

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
  const auto type = w.format == QuantFormat::kNf4 ? kernels::quant::FourBitType::kNf4
                                                  : kernels::quant::FourBitType::kFp4;
  kernels::GemmFourBit fb;
  fb.packed = w.data.data<uint8_t>();
  fb.absmax = absmax.data<float>();
  fb.table = kernels::quant::four_bit_dequant_values(type).data();
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

// Output rows of W per dequantized chunk: as many as fit the budget, and a multiple of the
// rows that make a chunk start on a quantization block (dequantize_range takes any start, but
// whole blocks decode faster).
int64_t chunk_rows(const QuantizedTensor& w, DType dtype) {
  const int64_t out_f = w.shape[0], in_f = w.shape[1];
  const int64_t row_bytes = in_f * static_cast<int64_t>(dtype.itemsize());
  const int64_t align = w.blocksize / std::gcd(in_f, w.blocksize);
  int64_t rows = std::max<int64_t>(1, four_bit_chunk_bytes() / std::max<int64_t>(1, row_bytes));
  rows = std::max(align, rows / align * align);
  return std::min(rows, out_f);
}

// Rows [r0, r0 + n) of W, dequantized to `dtype` as an (n, in_f) tensor.
Tensor dequantize_rows(const QuantizedTensor& w, const Tensor& absmax, int64_t r0, int64_t n,
                       DType dtype) {
  const int64_t in_f = w.shape[1];
  Tensor out = empty({n, in_f}, dtype);
  dequantize_range(w, absmax.data<float>(), r0 * in_f, n * in_f, dtype, out.data_ptr());
  return out;
}

// W dequantized into the tiles of `layout`, `rows_per_task` rows of W per task over the threads:
// each task decodes its rows into a buffer of its thread and `pack(rows, n, task, tiles)` writes
// them (n of them real, the rest of the task's tiles padding).
template <typename Pack>
Tensor dequantize_into_tiles(const QuantizedTensor& w, const Tensor& absmax,
                             const kernels::Bf16TiledB& layout, int64_t rows_per_task,
                             int64_t tasks, Pack pack) {
  const int64_t out_f = w.shape[0], in_f = w.shape[1];
  Tensor tiles = empty({layout.elements}, kBFloat16);
  uint16_t* b = static_cast<uint16_t*>(tiles.data_ptr());
  const float* am = absmax.data<float>();
#pragma omp parallel
  {
    std::vector<uint16_t> rows(static_cast<size_t>(rows_per_task * in_f));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t r0 = t * rows_per_task;
      const int64_t n = std::clamp<int64_t>(out_f - r0, 0, rows_per_task);
      if (n > 0) dequantize_range(w, am, r0 * in_f, n * in_f, kBFloat16, rows.data());
      pack(rows.data(), n, t, b);
    }
  }
  return tiles;
}

// The forward x @ W^T (+ bias) in bf16 with W dequantized straight into oneDNN's tiled layout
// for B = W^T: 64 rows of W (one n tile) per task, transposed into the tiles by k pairs.
// Undefined where oneDNN wants another layout. The result is the plain product's, as for the
// input gradient below.
Tensor forward_tiled(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                     const Tensor& bias) {
  const int64_t m = x.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, in_f, out_f);
  if (!layout) return Tensor();
  const Tensor tiles = dequantize_into_tiles(
      w, absmax, *layout, kernels::Bf16TiledB::kTileN, layout->n_tiles,
      [&](const uint16_t* rows, int64_t n, int64_t nt, uint16_t* b) {
        kernels::pack_bf16_n_tile_transposed(rows, in_f, n, in_f, *layout, nt, b);
      });
  Tensor y = empty({m, out_f}, kBFloat16);
  const Tensor xc = x.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  kernels::onednn_matmul_bf16_tiled_b(xc.data_ptr(), tiles.data_ptr(), m, in_f, out_f, y.data_ptr(),
                                      kBFloat16, bc.defined() ? bc.data_ptr() : nullptr);
  return y;
}

// The forward takes the tiled path from this many input rows. Its transposing pack costs about
// what the GEMM saves, so it pays where the product is long: bench_linear4bit on the AMX Xeon,
// NF4 / bf16 speed with and without it, GPT shapes at 2048 rows 1.01-1.07 against 0.96-0.99, the
// MLP's at 64 and 256 rows 0.64-0.73 against 0.69-0.87 (docs/quantization.md).
constexpr int64_t kTiledForwardMinRows = 1024;

// Whether a product of this layer takes a tiled path: bf16 on a CPU with native bf16, oneDNN
// allowed (not MANTISSA_GEMM=native), the weight within one chunk (the tiles hold all of it).
bool tiled_product(const QuantizedTensor& w, DType cd, int64_t rows) {
  return cd == kBFloat16 && rows > 0 && has_native_bf16() &&
         kernels::gemm_backend() != kernels::GemmBackend::kNative &&  // MANTISSA_GEMM=native
         chunk_rows(w, cd) >= w.shape[0];
}

// Whether a product (forward or input gradient) runs on mantissa's AMX kernels, W decoded a
// few rows at a time straight into tiles: bf16 on a CPU with AMX, oneDNN allowed
// (MANTISSA_GEMM=native keeps the native GEMM), few input rows. The weight need not fit one
// chunk: per thread, no more than 64 of its rows (forward), or 256 rows of the thread's columns
// (input gradient), exist decoded at a time.
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
  m.type = w.format == QuantFormat::kNf4 ? kernels::quant::FourBitType::kNf4
                                         : kernels::quant::FourBitType::kFp4;
  return m;
}

// The forward x @ W^T (+ bias) in bf16 on the AMX kernel (no dequantized weight).
Tensor forward_amx(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                   const Tensor& bias) {
  const Tensor xc = x.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = empty({xc.size(0), w.shape[0]}, kBFloat16);
  const kernels::quant::FourBitMatrix m = four_bit_matrix(w, absmax);
  kernels::quant::four_bit_forward_amx(
      m, static_cast<const uint16_t*>(xc.data_ptr()), xc.size(0),
      bc.defined() ? static_cast<const uint16_t*>(bc.data_ptr()) : nullptr,
      static_cast<uint16_t*>(y.data_ptr()));
  return y;
}

// The input gradient g @ W in bf16 on the AMX kernel (no dequantized weight).
Tensor input_grad_amx(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax) {
  const Tensor gc = g.contiguous();
  Tensor dx = empty({gc.size(0), w.shape[1]}, kBFloat16);
  kernels::quant::four_bit_input_grad_amx(four_bit_matrix(w, absmax),
                                          static_cast<const uint16_t*>(gc.data_ptr()), gc.size(0),
                                          static_cast<uint16_t*>(dx.data_ptr()));
  return dx;
}

// The forward product x @ W^T (+ bias) with W dequantized chunk by chunk; each chunk's output
// columns are computed in full (same K, same GEMM) and copied into place.
Tensor chunked_forward(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                       const Tensor& bias, DType cd) {
  const int64_t out_f = w.shape[0], rows = chunk_rows(w, cd);
  if (amx_product(cd, x.size(0))) return forward_amx(x, w, absmax, bias);
  if (tiled_product(w, cd, x.size(0)) && x.size(0) >= kTiledForwardMinRows) {
    Tensor tiled = forward_tiled(x, w, absmax, bias);
    if (tiled.defined()) return tiled;
  }
  if (rows >= out_f) return detail::matmul_nograd(x, dequantize(w, cd, absmax).t(), bias);
  Tensor y = empty({x.size(0), out_f}, cd);
  for (int64_t r0 = 0; r0 < out_f; r0 += rows) {
    const int64_t n = std::min(rows, out_f - r0);
    const Tensor wc = dequantize_rows(w, absmax, r0, n, cd);
    const Tensor bc = bias.defined() ? bias.slice(0, r0, r0 + n) : Tensor();
    y.slice(1, r0, r0 + n).copy_(detail::matmul_nograd(x, wc.t(), bc));
  }
  return y;
}

// The input gradient g @ W in bf16 with W dequantized straight into oneDNN's tiled layout for
// this product (kernels::Bf16TiledB), 32 rows of W (one k tile) per task: oneDNN then skips the
// repacking of W it does on every call for a plain operand. Undefined where oneDNN wants another
// layout. The tiles hold the same bf16 values as dequantize(w) and the product runs the same
// kernel on them, so the result is the plain product's.
Tensor input_grad_tiled(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax) {
  const int64_t m = g.size(0), out_f = w.shape[0], in_f = w.shape[1];
  const auto layout = kernels::onednn_bf16_tiled_b_layout(m, out_f, in_f);
  if (!layout) return Tensor();
  const Tensor tiles =
      dequantize_into_tiles(w, absmax, *layout, kernels::Bf16TiledB::kTileK, layout->k_tiles,
                            [&](const uint16_t* rows, int64_t n, int64_t kt, uint16_t* b) {
                              kernels::pack_bf16_k_tile(rows, in_f, n, in_f, *layout, kt, b);
                            });
  Tensor out = empty({m, in_f}, kBFloat16);
  const Tensor gc = g.contiguous();
  kernels::onednn_matmul_bf16_tiled_b(gc.data_ptr(), tiles.data_ptr(), m, out_f, in_f,
                                      out.data_ptr(), kBFloat16);
  return out;
}

// The input gradient g @ W with W dequantized chunk by chunk: the chunks' products (fp32
// accumulators) are summed in fp32 and rounded once to the compute dtype.
Tensor chunked_input_grad(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax,
                          DType cd) {
  const int64_t out_f = w.shape[0], rows = chunk_rows(w, cd);
  if (amx_product(cd, g.size(0))) return input_grad_amx(g, w, absmax);
  if (tiled_product(w, cd, g.size(0))) {
    Tensor tiled = input_grad_tiled(g, w, absmax);
    if (tiled.defined()) return tiled;
  }
  if (rows >= out_f) return detail::matmul_nograd(g, dequantize(w, cd, absmax));
  Tensor acc;
  for (int64_t r0 = 0; r0 < out_f; r0 += rows) {
    const int64_t n = std::min(rows, out_f - r0);
    const Tensor gc = g.slice(1, r0, r0 + n).contiguous();
    const Tensor wc = dequantize_rows(w, absmax, r0, n, cd);
    const Tensor part = cd == kBFloat16 ? detail::matmul_bf16_fp32_out(gc, wc)
                                        : detail::matmul_exact(gc.to(kFloat32), wc.to(kFloat32));
    if (!acc.defined()) {
      acc = part;
    } else {
      float* a = acc.data<float>();
      const float* p = part.data<float>();
      for (int64_t i = 0; i < acc.numel(); ++i) a[i] += p[i];
    }
  }
  return cd == kFloat32 ? acc : acc.to(cd);
}

int64_t g_chunk_bytes = int64_t{4} << 20;

}  // namespace

int64_t four_bit_chunk_bytes() { return g_chunk_bytes; }
void set_four_bit_chunk_bytes(int64_t bytes) {
  MANTISSA_CHECK(bytes > 0, kWhere, "the chunk budget must be positive, got {}", bytes);
  g_chunk_bytes = bytes;
}

Linear4bit::Linear4bit(int64_t in_features, int64_t out_features, bool with_bias,
                       const Linear4bitOptions& options, Generator* gen)
    : Module("Linear4bit"),
      in_features_(in_features),
      out_features_(out_features),
      options_(options) {
  check_options(options);
  MANTISSA_CHECK(in_features > 0 && out_features > 0, kWhere,
                 "feature counts must be positive, got in_features={} out_features={}", in_features,
                 out_features);
  // nn::Linear's kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), one double draw per
  // element in row-major order rounded to fp32, here consumed a chunk at a time.
  Generator& g = gen ? *gen : default_generator();
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const double low = -bound, high = bound;
  weight_ =
      quantize_4bit_generated({out_features, in_features}, kFloat32, four_bit_options(options),
                              [&](float* out, int64_t, int64_t count) {
                                for (int64_t i = 0; i < count; ++i)
                                  out[i] = static_cast<float>(low + (high - low) * g.uniform());
                              });
  register_weight();
  if (with_bias) {
    Tensor b = empty({out_features}, kFloat32);
    float* p = b.data<float>();
    for (int64_t i = 0; i < out_features; ++i)
      p[i] = static_cast<float>(low + (high - low) * g.uniform());
    bias = register_parameter("bias", b);
  }
}

Linear4bit::Linear4bit(QuantizedTensor weight, const Tensor& b, const Linear4bitOptions& options)
    : Module("Linear4bit"), options_(options) {
  check_options(options);
  MANTISSA_CHECK(weight.defined() && weight.shape.size() == 2, kWhere,
                 "the quantized weight must be 2-D [out_features, in_features]");
  MANTISSA_CHECK(weight.format == options.format && weight.has_nested == options.double_quant &&
                     weight.blocksize == options.blocksize,
                 kWhere,
                 "the quantized weight ({}, double_quant={}, blocksize {}) does not match "
                 "the options ({}, double_quant={}, blocksize {})",
                 quant_format_name(weight.format), weight.has_nested, weight.blocksize,
                 quant_format_name(options.format), options.double_quant, options.blocksize);
  out_features_ = weight.shape[0];
  in_features_ = weight.shape[1];
  weight_ = std::move(weight);
  register_weight();
  if (b.defined()) {
    MANTISSA_CHECK(b.dim() == 1 && b.size(0) == out_features_, kWhere,
                   "bias of shape {} does not match out_features {}", shape_str(b.shape()),
                   out_features_);
    bias = register_parameter("bias", b.detach().to(kFloat32).clone());
  }
}

std::shared_ptr<Linear4bit> Linear4bit::from_linear(const nn::Linear& linear,
                                                    const Linear4bitOptions& options) {
  check_options(options);
  QuantizedTensor q = quantize_4bit(linear.weight, four_bit_options(options));
  auto m = std::make_shared<Linear4bit>(std::move(q), linear.bias, options);
  m->train(linear.is_training());
  return m;
}

void Linear4bit::register_weight() {
  // bitsandbytes' order: weight, bias, then the quant state entries (the bias is registered
  // after this, and state_dict lists parameters before buffers, so "bias" comes first; the
  // order inside a file is fixed by the safetensors writer anyway).
  for (auto& [name, t] : to_bnb_tensors("weight", weight_)) {
    if (name == "weight." + quant_state_key(weight_.format)) state_json_ = t;
    register_serialized_buffer(name, t);
  }
  parsed_storage_ = state_json_.storage().get();
  parsed_version_ = state_json_.storage()->version();
}

const QuantizedTensor& Linear4bit::quantized_weight() const {
  // load_state_dict may have replaced the quant state; its dtype and nested_offset live there.
  const Storage* s = state_json_.storage().get();
  if (s != parsed_storage_ || s->version() != parsed_version_) {
    const Tensor c = state_json_.contiguous();
    const std::string text(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
    const auto j = nlohmann::json::parse(text);
    const std::string dt = j.at("dtype").get<std::string>();
    weight_.dtype = dt == "bfloat16" ? kBFloat16 : dt == "float16" ? kFloat16 : kFloat32;
    if (weight_.has_nested)
      weight_.nested.offset = static_cast<float>(j.at("nested_offset").get<double>());
    parsed_storage_ = s;
    parsed_version_ = s->version();
  }
  return weight_;
}

void Linear4bit::prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) {
  const std::string key = prefix + "weight." + quant_state_key(weight_.format);
  if (!state.contains(key)) return;  // load_state_dict reports the missing key
  // Validates the whole incoming quant state (throws naming what is wrong) and checks it fits.
  const QuantizedTensor in = from_bnb_tensors(prefix + "weight", [&](const std::string& k) {
    return state.contains(k) ? state.at(k) : Tensor();
  });
  MANTISSA_CHECK(in.shape == weight_.shape && in.blocksize == weight_.blocksize &&
                     in.has_nested == weight_.has_nested,
                 kWhere,
                 "\"{}weight\" holds a {} weight of shape {} (blocksize {}, "
                 "double_quant={}); this layer has shape {} (blocksize {}, double_quant={})",
                 prefix, quant_format_name(in.format), shape_str(in.shape), in.blocksize,
                 in.has_nested, shape_str(weight_.shape), weight_.blocksize, weight_.has_nested);
  const Tensor& incoming = state.at(key);
  if (incoming.numel() != state_json_.numel()) {  // the JSON text changed length: resize in place
    TensorImpl& impl = state_json_.impl();
    impl.storage = std::make_shared<Storage>(static_cast<size_t>(incoming.numel()));
    impl.shape = {incoming.numel()};
    impl.strides = {1};
    impl.offset = 0;
  }
}

void Linear4bit::set_compute_dtype(DType dtype) {
  Linear4bitOptions o = options_;
  o.compute_dtype = dtype;
  check_options(o);
  options_ = o;
}

Tensor Linear4bit::dequantized_weight(DType dtype) const {
  return dequantize(quantized_weight(), dtype);
}

Tensor Linear4bit::forward(const Tensor& input) {
  const DType cd = options_.compute_dtype;
  MANTISSA_CHECK(input.is_floating_point() && !input.dtype().is_float8(), kWhere,
                 "input must be float32, bfloat16 or float16, got {}", input.dtype().name());
  const Tensor x = input.to(cd);
  InternalCastScope internal;  // the layer's compute dtype, not a cast by hand
  const Tensor b = bias.defined() ? bias.to(cd) : Tensor();
  return linear_4bit(x, quantized_weight(), b).to(layer_output_dtype(input, cd));
}

std::string Linear4bit::extra_repr() const {
  return fmt::format(
      "in_features={}, out_features={}, bias={}, format={}, double_quant={}, "
      "compute_dtype={}",
      in_features_, out_features_, bias.defined(), quant_format_name(options_.format),
      options_.double_quant, options_.compute_dtype.name());
}

Tensor linear_4bit(const Tensor& input, const QuantizedTensor& weight, const Tensor& bias) {
  MANTISSA_CHECK(weight.defined() && weight.shape.size() == 2, "linear_4bit",
                 "weight must be a 2-D quantized tensor");
  const int64_t out_f = weight.shape[0], in_f = weight.shape[1];
  MANTISSA_CHECK(input.dim() >= 1 && input.size(-1) == in_f, "linear_4bit",
                 "input of shape {} does not match weight of shape {} (expected last dim {})",
                 shape_str(input.shape()), shape_str(weight.shape), in_f);
  const DType cd = input.dtype();
  MANTISSA_CHECK(cd == kFloat32 || cd == kBFloat16 || cd == kFloat16, "linear_4bit",
                 "input must be float32, bfloat16 or float16, got {}", cd.name());
  if (bias.defined())
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == out_f && bias.dtype() == cd, "linear_4bit",
                   "bias must be [{}] in {}, got {} in {}", out_f, cd.name(),
                   shape_str(bias.shape()), bias.dtype().name());
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const bool fused = fused_four_bit_gemm() && rows > 0;
  // Resolved once per forward (one float per block; double quantization decoded here) and kept
  // for the backward: 4 bytes per 64 weights.
  const Tensor absmax = block_absmax(weight);
  Tensor y2;
  if (fused) {
    y2 = four_bit_matmul(x2, weight, absmax, true, bias.defined() ? bias.detach() : Tensor());
  } else {
    y2 = chunked_forward(x2, weight, absmax, bias.defined() ? bias.detach() : Tensor(), cd);
  }
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  Tensor y = y2.view(out_shape);
  if (!autograd::needs_grad(input, bias)) return y;
  const bool need_x = input.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const QuantizedTensor w = weight;  // shares the packed tensors, no copy
  return autograd::record(y, {input, bias}, "Linear4bitBackward", [=](const Tensor& grad) {
    const Tensor g2 = (grad.dtype() == cd ? grad : grad.to(cd)).reshape({rows, out_f});
    std::vector<Tensor> grads(2);
    if (need_x) {
      grads[0] = (fused ? four_bit_matmul(g2, w, absmax, false, Tensor())
                        : chunked_input_grad(g2, w, absmax, cd))
                     .view(x_shape);
    }
    if (need_b) grads[1] = kernels::sum_rows(g2);  // as nn::Linear's bias gradient
    return grads;
  });
}

}  // namespace mantissa::quant
