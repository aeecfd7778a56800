#include "mantissa/fp8/nvfp4_scaling.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "kernels/cpu/mx/hadamard.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::fp8 {
namespace {

constexpr const char* kWhere = "nvfp4 recipe";
namespace km = kernels::mx;

std::mutex& stream_mutex() {
  static std::mutex m;
  return m;
}

// The (seed, offset) of one stochastically rounded cast; advances the stream.
std::pair<uint64_t, uint64_t> take_sr_offset() {
  std::lock_guard<std::mutex> lock(stream_mutex());
  SrStream& s = nvfp4_sr_stream();
  return {s.seed, s.offset++};
}

Tensor source_of(const Tensor& x) {
  MANTISSA_CHECK(x.defined() && !x.is_cuda(), kWhere, "the nvfp4 recipe casts CPU tensors only{}",
                 x.defined() ? "; got a tensor on " + x.device().str() : std::string());
  MANTISSA_CHECK(x.dim() == 2, kWhere, "expected a 2-D tensor, got {}", shape_str(x.shape()));
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16, kWhere,
                 "expected float32, bfloat16 or float16, got {}", x.dtype().name());
  const Tensor d = x.detach();
  return (d.dtype() == kFloat16 ? d.to(kFloat32) : d).contiguous();
}

// An uncast rows x cols NVFP4 tensor: its codes and scales allocated.
Nvfp4Tensor blank(int64_t rows, int64_t cols, bool tiles) {
  Nvfp4Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.tiles_16x16 = tiles;
  const formats::BlockLayout layout{FormatId::kNvfp4, rows, cols};
  q.codes = empty({rows, layout.row_code_bytes()}, kUInt8);
  q.scales = empty({rows, layout.row_scales()}, kUInt8);
  return q;
}

// A cast's encoding under `tensor_scale`, taking the stream's next offset when it rounds
// stochastically.
km::Nvfp4Encoding encoding_of(float tensor_scale, bool tiles, bool stochastic) {
  km::Nvfp4Encoding e;
  e.tensor_scale = tensor_scale;
  e.tiles_16x16 = tiles;
  if (stochastic) {
    e.rounding = km::Fp4Rounding::kStochastic;
    std::tie(e.seed, e.offset) = take_sr_offset();
  }
  return e;
}

// The format table's NVFP4 cast (the kernels behind formats::quantize_into), its statistics
// counted as it encodes. `amax`: the source's max |x| where a pass before took it (NaN where the
// source holds one); else the tensor scale's pass (or, for tiles, the tiles' amax pass) takes it.
Nvfp4Tensor encode(const void* src, DType dtype, int64_t rows, int64_t cols, bool tiles,
                   bool stochastic, bool stats, std::optional<float> amax = std::nullopt) {
  Nvfp4Tensor q = blank(rows, cols, tiles);
  std::vector<float> tile_amax;
  if (tiles) {
    tile_amax.resize(static_cast<size_t>(q.scales.size(1) * ((rows + 15) / 16)));
    amax = km::nvfp4_tile_amax(src, dtype, rows, cols, tile_amax.data());
  }
  // A float32 source rounded to nearest: the 1x16 blocks' amax come with the tensor's from one
  // read, so that the cast reads the source once more, for its codes only (from the tensors'
  // allocator: no page faults a cast). A bfloat16 cast takes its blocks' amax itself: there the
  // pass's writes (a float per 16 elements) cost what the cast saves.
  Tensor block_amax;
  if (!tiles && !amax && !stochastic && dtype == kFloat32) {
    block_amax = empty({rows, q.scales.size(1)}, kFloat32);
    amax = km::nvfp4_block_amax(src, dtype, rows, cols, block_amax.data<float>());
  }
  km::Nvfp4Encoding e = encoding_of(
      amax ? km::nvfp4_tensor_scale_of(*amax) : km::nvfp4_tensor_scale(src, dtype, rows * cols),
      tiles, stochastic);
  if (tiles) {
    e.tile_amax = tile_amax.data();
    e.tile_amax_exact = true;  // src's own: the statistics take their records from them
  }
  if (block_amax.defined()) e.block_amax = block_amax.data<float>();
  km::MxCastStats st;
  km::nvfp4_quantize(src, dtype, rows, cols, e, static_cast<uint8_t*>(q.codes.data_ptr()),
                     static_cast<uint8_t*>(q.scales.data_ptr()), simd_level(),
                     stats ? &st : nullptr);
  q.tensor_scale = e.tensor_scale;
  if (!stats) return q;
  q.amax = st.amax;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
}

}  // namespace

SrStream& nvfp4_sr_stream() {
  static SrStream stream;
  return stream;
}

SrStream next_sr_draw() {
  const auto [seed, offset] = take_sr_offset();
  return {seed, offset};
}

Nvfp4Tensor quantize_nvfp4(const Tensor& x, const Nvfp4Cast& cast) {
  const Tensor src = source_of(x);
  return encode(src.data_ptr(), src.dtype(), src.size(0), src.size(1), cast.tiles_16x16,
                cast.stochastic, cast.stats);
}

Nvfp4Tensor quantize_nvfp4_transposed(const Tensor& x, bool rht, bool stochastic, bool stats) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  if (!rht) {
    const Tensor t = src.t().contiguous();
    return encode(t.data_ptr(), t.dtype(), cols, rows, false, stochastic, stats);
  }
  const int64_t padded = km::rht_padded(rows);
  if (!stats) {
    // Cast as the transform is made (twice: once for the tensor scale), never stored.
    Nvfp4Tensor q = blank(cols, padded, false);
    const km::Nvfp4Encoding e = encoding_of(
        km::nvfp4_tensor_scale_of(km::rht_transpose_amax(src.data_ptr(), src.dtype(), rows, cols)),
        false, stochastic);
    km::rht_transpose_nvfp4(src.data_ptr(), src.dtype(), rows, cols, e,
                            static_cast<uint8_t*>(q.codes.data_ptr()),
                            static_cast<uint8_t*>(q.scales.data_ptr()));
    q.tensor_scale = e.tensor_scale;
    return q;
  }
  Tensor t = empty({cols, padded}, kFloat32);
  float amax = 0.0f;
  km::rht_transpose(src.data_ptr(), src.dtype(), rows, cols, t.data<float>(), simd_level(), &amax);
  return encode(t.data_ptr(), kFloat32, cols, padded, false, stochastic, stats, amax);
}

Tensor dequantize(const Nvfp4Tensor& q) {
  Tensor out = empty({q.rows, q.cols}, kFloat32);
  const formats::BlockLayout layout{FormatId::kNvfp4, q.rows, q.cols};
  formats::dequantize_into(layout,
                           std::span(static_cast<const uint8_t*>(q.codes.data_ptr()),
                                     static_cast<size_t>(layout.code_bytes())),
                           std::span(static_cast<const uint8_t*>(q.scales.data_ptr()),
                                     static_cast<size_t>(layout.scale_bytes())),
                           q.tensor_scale,
                           std::span(out.data<float>(), static_cast<size_t>(q.rows * q.cols)));
  return out;
}

Tensor nvfp4_gemm(const Nvfp4Tensor& a, const Nvfp4Tensor& b, bool transpose_b, const Tensor& bias,
                  DType out_dtype) {
  MANTISSA_CHECK(transpose_b || b.tiles_16x16, kWhere,
                 "a 1x16-blocked operand is read along its blocks only (transposed as B)");
  gemm::Operand bo = gemm::block_scaled(FormatId::kNvfp4, b.codes, b.scales, {b.rows, b.cols},
                                        b.tensor_scale, b.tiles_16x16);
  gemm::Epilogue e;
  e.bias = bias;
  e.out_dtype = out_dtype;
  return gemm::gemm(
      gemm::block_scaled(FormatId::kNvfp4, a.codes, a.scales, {a.rows, a.cols}, a.tensor_scale),
      transpose_b ? bo.t() : bo, e);
}

}  // namespace mantissa::fp8
