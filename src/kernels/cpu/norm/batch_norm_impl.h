// The batch-norm row loops (batch_norm_kernels.h), written once in 16-lane GCC vectors. Each
// level's .cpp includes this file inside an anonymous namespace, after a `#pragma GCC target`
// for SIMD levels; at the baseline GCC lowers the vectors to SSE2. Tails go through the same
// vector code, zero-padded, so a value's result never depends on where a row ends.
// No include guard on purpose: each level's translation unit includes it once.

using V = float __attribute__((vector_size(64)));
using VU = uint32_t __attribute__((vector_size(64)));
using VI = int32_t __attribute__((vector_size(64)));
using VH = uint16_t __attribute__((vector_size(32)));
using V8 = float __attribute__((vector_size(32)));  // one ymm
constexpr int64_t kW = 16;

inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline V load(const uint16_t* p) {
  VH h;
  std::memcpy(&h, p, sizeof h);
  return reinterpret_cast<V>(__builtin_convertvector(h, VU) << 16);
}
// f16: widened exactly and rounded to nearest even, as Tensor::to does: F16C where the level's
// file sets MANTISSA_BN_F16C (a target pragma does not define __F16C__), else Half's scalar
// conversion, which gives the same bits.
inline V load(const Half* p) {
#if MANTISSA_BN_F16C
  const V8 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const V8 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  float f[kW];
  for (int64_t i = 0; i < kW; ++i) f[i] = static_cast<float>(p[i]);
  V v;
  std::memcpy(&v, f, sizeof v);
  return v;
#endif
}
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
inline void store(Half* p, V v) {
#if MANTISSA_BN_F16C
  // Halves as 8-lane vectors in registers (a memcpy of each half went through the stack).
  convert_detail::store_f16x16(reinterpret_cast<uint16_t*>(p),
                               __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
#else
  float f[kW];
  std::memcpy(f, &v, sizeof v);
  for (int64_t i = 0; i < kW; ++i) p[i] = Half(f[i]);
#endif
}
// RNE with NaN made quiet (sign and top payload kept), bit-identical to BFloat16(float).
inline void store(uint16_t* p, V v) {
  const VU b = reinterpret_cast<VU>(v);
  const VU rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  // NaN test as a signed compare (the magnitude is non-negative) and a bitwise select: an
  // unsigned compare has no AVX2 instruction and GCC made it 16 scalar compares.
  const VU nan = reinterpret_cast<VU>(reinterpret_cast<VI>(b & 0x7fffffffu) > 0x7f800000);
  const VU out = (nan & ((b >> 16) | 0x40u)) | (~nan & rounded);
  const VH h = __builtin_convertvector(out, VH);
  std::memcpy(p, &h, sizeof h);
}
template <typename T>
inline V load_tail(const T* p, int64_t n) {
  T buf[kW] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(T));
  return load(buf);
}
template <typename T>
inline void store_tail(T* p, V v, int64_t n) {
  T buf[kW];
  store(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(T));
}
// Lanes [0, n) set.
inline VI lanes_below(int64_t n) {
  const VI idx = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return idx < static_cast<int32_t>(n);
}
// A fixed tree, the same on every level.
inline float hsum(V v) {
  float s[kW];
  std::memcpy(s, &v, sizeof s);
  for (int64_t w = kW / 2; w > 0; w /= 2)
    for (int64_t i = 0; i < w; ++i) s[i] += s[i + w];
  return s[0];
}

template <typename T>
float row_sum(const T* x, int64_t n) {
  V acc = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) acc += load(x + i);
  if (i < n) acc += load_tail(x + i, n - i);
  return hsum(acc);
}

template <typename T>
float row_sq_dev(const T* x, int64_t n, float mean) {
  V acc = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V d = load(x + i) - mean;
    acc += d * d;
  }
  if (i < n) {
    const V d = lanes_below(n - i) ? load_tail(x + i, n - i) - mean : V{};
    acc += d * d;
  }
  return hsum(acc);
}

template <typename T>
void row_affine(const T* x, T* y, int64_t n, float a, float b) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(y + i, load(x + i) * a + b);
  if (i < n) store_tail(y + i, load_tail(x + i, n - i) * a + b, n - i);
}

template <typename T>
void row_grad_sums(const T* g, const T* x, int64_t n, float mean, float* sum_g, float* sum_g_dev) {
  V sg = {}, sgd = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V gv = load(g + i);
    sg += gv;
    sgd += gv * (load(x + i) - mean);
  }
  if (i < n) {
    // Padding lanes have g = 0, and x = 0 stays finite, so they add nothing.
    const V gv = load_tail(g + i, n - i);
    sg += gv;
    sgd += gv * (load_tail(x + i, n - i) - mean);
  }
  *sum_g = hsum(sg);
  *sum_g_dev = hsum(sgd);
}

template <typename T>
void row_grad_input(const T* g, const T* x, T* gx, int64_t n, float a, float b, float c,
                    float mean) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(gx + i, load(g + i) * a + (load(x + i) - mean) * b + c);
  if (i < n) {
    const V v = load_tail(g + i, n - i) * a + (load_tail(x + i, n - i) - mean) * b + c;
    store_tail(gx + i, v, n - i);
  }
}

template <typename T>
constexpr BnRowKernels<T> row_kernels() {
  return {row_sum<T>, row_sq_dev<T>, row_affine<T>, row_grad_sums<T>, row_grad_input<T>};
}

constexpr BnKernels kTable{row_kernels<float>(), row_kernels<uint16_t>(), row_kernels<Half>()};
