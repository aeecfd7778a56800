// Scalar level of the NF4/FP4 kernels and the dispatch (see four_bit.h for the rules).
#include "kernels/cpu/quant/four_bit.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::quant {

float block_absmax_scalar(const float* x, int64_t n) {
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= std::isnan(a);
    m = a > m ? a : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// codes[i] = code of x[i] * scale (or x[i] / scale when divide).
void quantize_block_scalar(const float* x, int64_t n, bool divide, float scale, FormatId format,
                           uint8_t* codes) {
  const FourBitCodebook& book = four_bit_codebook(format);
  for (int64_t i = 0; i < n; ++i) {
    const float v = divide ? x[i] / scale : x[i] * scale;
    codes[i] = four_bit_code(v, book);
  }
}

namespace {

constexpr float kMinAbsmax = 1e-38f;  // bitsandbytes clamps the absmax before scaling

void quantize_4bit_scalar(const float* x, int64_t first, int64_t count, int64_t total,
                          int64_t blocksize, FormatId format, uint8_t* packed, float* absmax) {
  std::vector<uint8_t> codes(static_cast<size_t>(blocksize) + 1);
  for (int64_t start = first; start < first + count; start += blocksize) {
    const int64_t len = std::min(blocksize, total - start);
    const float* xb = x + (start - first);
    float am = block_absmax_scalar(xb, len);
    const bool partial = len < blocksize;
    if (partial) {
      am = std::isnan(am) ? am : std::max(am, kMinAbsmax);
      quantize_block_scalar(xb, len, true, am, format, codes.data());
    } else {
      const float clamped = std::isnan(am) ? am : std::max(am, kMinAbsmax);
      quantize_block_scalar(xb, len, false, 1.0f / clamped, format, codes.data());
    }
    absmax[start / blocksize] = am;
    int64_t n = len;
    if (n % 2) codes[n++] = four_bit_code(0.0f, four_bit_codebook(format));
    uint8_t* dst = packed + start / 2;
    for (int64_t i = 0; i < n; i += 2)
      dst[i / 2] = static_cast<uint8_t>(codes[i] << 4 | codes[i + 1]);
  }
}

}  // namespace

void dequantize_4bit_scalar(const uint8_t* packed, const float* absmax, int64_t first,
                            int64_t count, int64_t blocksize, FormatId format, float* out) {
  const auto& table = four_bit_codebook(format).dequant_values;
  for (int64_t k = first; k < first + count; ++k) {
    const uint8_t byte = packed[k / 2];
    const int code = (k % 2) ? (byte & 0xF) : (byte >> 4);
    out[k - first] = table[code] * absmax[k / blocksize];
  }
}

void quantize_4bit(const float* x, int64_t first, int64_t count, int64_t total, int64_t blocksize,
                   FormatId format, uint8_t* packed, float* absmax, SimdLevel level) {
  if (level >= SimdLevel::kAvx2)
    quantize_4bit_avx2(x, first, count, total, blocksize, format, packed, absmax);
  else
    quantize_4bit_scalar(x, first, count, total, blocksize, format, packed, absmax);
}

void dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t first, int64_t count,
                     int64_t blocksize, FormatId format, float* out, SimdLevel level) {
  if (level >= SimdLevel::kAvx2)
    dequantize_4bit_avx2(packed, absmax, first, count, blocksize, format, out);
  else
    dequantize_4bit_scalar(packed, absmax, first, count, blocksize, format, out);
}

void dequantize_4bit_16(const uint8_t* packed, const float* absmax, int64_t first, int64_t count,
                        int64_t blocksize, FormatId format, bool bf16, uint16_t* out,
                        SimdLevel level) {
  if (level >= SimdLevel::kAvx512 && simd_level() >= SimdLevel::kAvx512) {
    const bool native = level >= SimdLevel::kAvx512Bf16 && simd_level() >= SimdLevel::kAvx512Bf16;
    dequantize_4bit_16_avx512(packed, absmax, first, count, blocksize, format, bf16, native, out);
    return;
  }
  // Below AVX-512: float32 through a stack buffer, then the bulk conversion.
  constexpr int64_t kStage = 4096;
  float stage[kStage];
  for (int64_t done = 0; done < count; done += kStage) {
    const int64_t m = std::min(kStage, count - done);
    dequantize_4bit(packed, absmax, first + done, m, blocksize, format, stage, level);
    if (bf16)
      convert_f32_to_bf16(stage, out + done, m);
    else
      convert_f32_to_f16(stage, out + done, m);
  }
}

}  // namespace mantissa::kernels::quant
