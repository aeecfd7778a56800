#pragma once
// The casts of TransformerEngine 2.x's NVFP4BlockScaling recipe (docs/fp8.md "NVFP4"): E2M1
// codes in 1x16 blocks (or 16x16 tiles, for weights) with E4M3 block scales under an fp32
// per-tensor scale amax / (448 * 6), rounded to nearest or stochastically, optionally after the
// 16-point random Hadamard transform of the tensor's transpose. The codes and scales are the
// format table's NVFP4 (include/mantissa/formats/block_formats.h, torchao's bytes); the
// transform is kernels/cpu/mx/hadamard.h.
#include <cstdint>

#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"

namespace mantissa::fp8 {

// A 2-D tensor quantized to NVFP4, rows x cols, blocks along cols (a product's K).
struct Nvfp4Tensor {
  int64_t rows = 0;
  int64_t cols = 0;
  Tensor codes;   // uint8 [rows, ceil(cols / 2)], the even column in the low nibble
  Tensor scales;  // uint8 [rows, ceil(cols / 16)], E4M3 (a 16x16 tile's in each of its rows)
  float tensor_scale = 1.0f;  // value = e2m1(code) * f32(tensor_scale * e4m3(scale))
  bool tiles_16x16 = false;   // one scale per 16x16 tile: may be read either way in a product
  // For statistics, where the cast was asked for them (else 0): max |x| of the source (NaN
  // passed over); saturated: |x| * encode factor above 6; flushed: x != 0 coded 0.
  float amax = 0.0f;
  CastCounts counts;
};

// How one tensor is cast.
struct Nvfp4Cast {
  bool tiles_16x16 = false;  // one scale per 16x16 tile (weights)
  bool stochastic = false;   // stochastic rounding from the stream (nvfp4_sr_stream)
  bool stats = true;  // amax and counts, counted as the cast encodes; off for copies not recorded
};

// x: 2-D float32, bfloat16 or float16 on the CPU (float16 is widened to float32 first).
Nvfp4Tensor quantize_nvfp4(const Tensor& x, const Nvfp4Cast& cast);
// x^T quantized along x's rows (a product's K over tokens): with `rht` after the random Hadamard
// transform, then rows x^T has cols = rht_padded(x.size(0)) (the transform's zero padding), else
// x.size(0). 16x16 tiles are not offered: they are for weights, which take no transform.
Nvfp4Tensor quantize_nvfp4_transposed(const Tensor& x, bool rht, bool stochastic,
                                      bool stats = true);

// float32 [rows, cols] values the codes stand for.
Tensor dequantize(const Nvfp4Tensor& q);

// a @ op(b) + bias in fp32, rounded once to out_dtype, through gemm::block_scaled: a [M, K]
// blocked along K; b [N, K] blocked along K read transposed (transpose_b), or, 16x16-tiled,
// [K, N] read as stored.
Tensor nvfp4_gemm(const Nvfp4Tensor& a, const Nvfp4Tensor& b, bool transpose_b, const Tensor& bias,
                  DType out_dtype);

// The stochastic rounding's Philox stream, process-wide as TransformerEngine draws from the
// device generator: every stochastically rounded cast takes (seed, offset) and advances offset
// by one, so a run is reproducible from the seed, and a checkpoint that stores both resumes it
// exactly (the transformer-engine plugin's state). Element (r, c) of a cast draws the 8 bits
// kernels/cpu/mx/philox.h's sr_byte(seed, offset, r, c).
struct SrStream {
  uint64_t seed = 0;
  uint64_t offset = 0;
  friend bool operator==(const SrStream&, const SrStream&) = default;
};
// The random bits each element draws (philox.h, sr_byte), which a checkpoint's stream records
// ("bits_per_element"): a build that drew a 32-bit word per element wrote none.
inline constexpr uint64_t kSrBitsPerElement = 8;
SrStream& nvfp4_sr_stream();
// The (seed, offset) one stochastically rounded cast of another recipe draws with (the mxfp4
// recipe's, mx_linear.cpp), taken under the stream's lock as this file's casts take theirs:
// the stream's offset advances by one.
SrStream next_sr_draw();

}  // namespace mantissa::fp8
