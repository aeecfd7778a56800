#include "kernels/cpu/gemm/bf16_split.h"

#include <type_traits>

#include "mantissa/core/bfloat16.h"

namespace mantissa::kernels {
namespace {

struct Terms {
  uint16_t hi, lo;
};

inline Terms split(float x) {
  const uint16_t hi = float_to_bf16_bits(x);
  // x - hi is exact in fp32 (Sterbenz-like: hi is x rounded to 8 bits); inf/NaN give NaN lo,
  // which a product propagates as the fp32 GEMM would.
  const uint16_t lo = float_to_bf16_bits(x - bf16_bits_to_float(hi));
  return {hi, lo};
}

template <typename T>
inline T as(uint16_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    return bf16_bits_to_float(bits);
  } else {
    return bits;
  }
}

template <typename T>
void pack_a(const float* a, int64_t rows, int64_t k, int terms, T* out) {
  const int64_t width = terms * k;
#pragma omp parallel for schedule(static) if (rows * k > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = a + r * k;
    T* dst = out + r * width;
    for (int64_t j = 0; j < k; ++j) {
      const Terms t = split(src[j]);
      dst[j] = as<T>(t.hi);
      if (terms == 3) {
        dst[k + j] = as<T>(t.hi);
        dst[2 * k + j] = as<T>(t.lo);
      }
    }
  }
}

template <typename T>
void pack_b(const float* b, int64_t batch, int64_t k, int64_t n, int terms, T* out) {
  const int64_t rows = batch * k;
#pragma omp parallel for schedule(static) if (rows * n > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t bi = r / k, i = r % k;
    const float* src = b + r * n;
    T* hi = out + (bi * terms * k + i) * n;
    for (int64_t j = 0; j < n; ++j) {
      const Terms t = split(src[j]);
      hi[j] = as<T>(t.hi);
      if (terms == 3) {
        hi[k * n + j] = as<T>(t.lo);
        hi[2 * k * n + j] = as<T>(t.hi);
      }
    }
  }
}

}  // namespace

void pack_bf16_terms_a(const float* a, int64_t rows, int64_t k, int terms, float* out) {
  pack_a(a, rows, k, terms, out);
}
void pack_bf16_terms_a(const float* a, int64_t rows, int64_t k, int terms, uint16_t* out) {
  pack_a(a, rows, k, terms, out);
}
void pack_bf16_terms_b(const float* b, int64_t batch, int64_t k, int64_t n, int terms, float* out) {
  pack_b(b, batch, k, n, terms, out);
}
void pack_bf16_terms_b(const float* b, int64_t batch, int64_t k, int64_t n, int terms,
                       uint16_t* out) {
  pack_b(b, batch, k, n, terms, out);
}

}  // namespace mantissa::kernels
