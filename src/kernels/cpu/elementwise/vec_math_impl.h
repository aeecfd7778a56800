// The vector-math algorithms, written once against a lane type. Each level's .cpp defines, in
// an anonymous namespace and before including this file:
//   V, VI   float / int32 lanes (plain float and int32_t for the scalar level, GCC vectors else)
//   kW      lanes per V
//   as_i, as_f (bit casts), to_f (int32 -> float), fmadd(a, b, c) = a * b + c,
//   all_lanes(mask): whether every lane of a comparison's result is true
// and, for the SIMD levels, a `#pragma GCC target` so the code below is compiled for that ISA.
// Comparisons give bool (scalar) or lane masks (vectors); `m ? a : b` selects in both.
//
// Methods (constants fitted for this file: Chebyshev interpolation, converted to monomials):
//   exp   x = n ln2 + r, |r| <= ln2/2 (two-part ln2), degree-7 Taylor, 2^n applied in two
//         steps so results that are subnormal are rounded once and overflow gives inf.
//   log   x = 2^e m, m in [sqrt(1/2), sqrt 2), f = m - 1 exact; log1p(f) from s = f/(2+f) in
//         the form f - (f^2/2 - s (f^2/2 + R(s^2))), which keeps f's leading bits exact.
//   tanh  |x| < 0.625: x + x z h(z), z = x^2; else 1 - 2/(exp(2|x|) + 1) (no cancellation
//         there since tanh > 1/2); sign restored by bits.
//   erf   |x| < 1: x + x k(x^2); |x| < 3.92: 1 - exp(-x^2) erfcx(|x|) with erfcx polynomial
//         around 2.46; beyond, 1 (erfc < 2^-25 rounds away).
// No include guard on purpose: each level's translation unit includes it once.

constexpr float kLn2Hi = 0.693145751953125f;  // 15 significant bits: n * kLn2Hi is exact
constexpr float kLn2Lo = 1.428606765330187045e-06f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr int32_t kRoundMagicBits = 0x4b400000;

inline V splat(float c) { return V{} + c; }
inline VI splat_i(int32_t c) { return VI{} + c; }
inline V vabs(V x) { return as_f(as_i(x) & 0x7fffffff); }
inline V copy_sign(V mag, V sign) {
  return as_f((as_i(mag) & 0x7fffffff) | (as_i(sign) & static_cast<int32_t>(0x80000000u)));
}

#ifndef MANTISSA_VM_LEVEL_CLAMP
// x limited to [lo, hi]; NaN fails both tests and stays NaN. A level defines its own from
// min/max instructions with the same NaN rule (GCC leaves these selects as compare + blend).
inline V clamp_keep_nan(V x, float lo, float hi) {
  x = x > hi ? splat(hi) : x;
  return x < lo ? splat(lo) : x;
}
#endif

inline V exp_v(V x) {
  // Clamp so that 2^n stays representable in two factors; NaN stays.
  x = clamp_keep_nan(x, -104.0f, 89.0f);
  const V k = fmadd(x, splat(kLog2e), splat(kRoundMagic));
  const VI ni = as_i(k) - kRoundMagicBits;
  const V n = k - kRoundMagic;
  V r = fmadd(n, splat(-kLn2Hi), x);
  r = fmadd(n, splat(-kLn2Lo), r);
  V q = splat(1.0f / 5040);
  q = fmadd(q, r, splat(1.0f / 720));
  q = fmadd(q, r, splat(1.0f / 120));
  q = fmadd(q, r, splat(1.0f / 24));
  q = fmadd(q, r, splat(1.0f / 6));
  q = fmadd(q, r, splat(0.5f));
  const V p = fmadd(q, r * r, r) + 1.0f;
  // 2^n = 2^n1 * 2^n2 with both factors normal for n in [-150, 129].
  const VI n1 = ni >> 1;
  const VI n2 = ni - n1;
  return (p * as_f((n1 + 127) << 23)) * as_f((n2 + 127) << 23);
}

inline V log_v(V x) {
  // Zero, negative and NaN inputs get their answers at the end; their bits would overflow the
  // int32 subtraction below (undefined behaviour, found by UBSan), so they go through it as 1.
  const V xp = x > 0.0f ? x : splat(1.0f);
  // Subnormals: scale into the normal range first.
  const auto sub = xp < 1.17549435e-38f;
  const V xs = sub ? xp * 8388608.0f : xp;
  const VI bias = sub ? splat_i(23) : splat_i(0);
  const VI t = as_i(xs) - 0x3f3504f3;  // bits of sqrt(1/2): m lands in [sqrt(1/2), sqrt 2)
  const VI e = (t >> 23) - bias;
  const V m = as_f((t & 0x007fffff) + 0x3f3504f3);
  const V f = m - 1.0f;
  const V s = f / (f + 2.0f);
  const V z = s * s;
  V R = splat(2.0f / 9);
  R = fmadd(R, z, splat(2.0f / 7));
  R = fmadd(R, z, splat(2.0f / 5));
  R = fmadd(R, z, splat(2.0f / 3));
  R = R * z;
  const V hfsq = 0.5f * f * f;
  const V ef = to_f(e);
  const V lo = fmadd(s, hfsq + R, ef * kLn2Lo);
  V y = fmadd(ef, splat(kLn2Hi), f - (hfsq - lo));
  y = x == 0.0f ? splat(-__builtin_inff()) : y;
  y = x < 0.0f ? splat(__builtin_nanf("")) : y;
  y = x == __builtin_inff() ? x : y;
  y = x != x ? x : y;
  return y;
}

inline V tanh_v(V x) {
  const V ax = vabs(x);
  const V z = x * x;
  V h = splat(2.292744940e-03f);
  h = fmadd(h, z, splat(-8.343945663e-03f));
  h = fmadd(h, z, splat(2.176891872e-02f));
  h = fmadd(h, z, splat(-5.395925959e-02f));
  h = fmadd(h, z, splat(1.333330356e-01f));
  h = fmadd(h, z, splat(-3.333333317e-01f));
  const V small = copy_sign(fmadd(x, z * h, x), x);  // keeps tanh(-0) = -0
  // exp overflow (|x| > 44) gives 2/inf = 0, i.e. +-1; NaN stays NaN.
  const V big = copy_sign(1.0f - 2.0f / (exp_v(ax + ax) + 1.0f), x);
  return ax < 0.625f ? small : big;
}

inline V sigmoid_v(V x) {
  // t = exp(-|x|) <= 1 never overflows: 1/(1+t) for x >= 0, t/(1+t) below (down to the
  // subnormals, and 0 for x < -104). 1 + t is split into d + dl exactly, and the quotient by
  // d is corrected for dl: q (1 - dl/d), where 1/d = q (x >= 0) or 1 - q (x < 0) to first order.
  const V t = exp_v(-vabs(x));
  const auto pos = x >= 0.0f;
  const V num = pos ? splat(1.0f) : t;
  const V d = t + 1.0f;
  const V dl = (1.0f - d) + t;
  const V q = num / d;
  const V inv_d = pos ? q : 1.0f - q;
  const V y = fmadd(-q * dl, inv_d, q);
  return x != x ? x : y;
}

// x sigmoid(x): the product of the two rounded values, as mul(x, sigmoid(x)) gives.
inline V silu_v(V x) { return x * sigmoid_v(x); }

// d/dx [x s] = s (1 + x (1 - s)), s = sigmoid(x) (torch's silu_backward).
inline V silu_grad_v(V x) {
  const V s = sigmoid_v(x);
  return s * (1.0f + x * (1.0f - s));
}

inline V erf_v(V x) {
  const V ax = vabs(x);
  const V z = x * x;
  V k = splat(-9.667044402e-06f);
  k = fmadd(k, z, splat(1.126595896e-04f));
  k = fmadd(k, z, splat(-8.484080396e-04f));
  k = fmadd(k, z, splat(5.221031807e-03f));
  k = fmadd(k, z, splat(-2.686543073e-02f));
  k = fmadd(k, z, splat(1.128378250e-01f));
  k = fmadd(k, z, splat(-3.761263847e-01f));
  k = fmadd(k, z, splat(1.283791671e-01f));
  const V small = fmadd(x, k, x);
  // Every lane below 1 (most vectors of a GELU's input): the other branch, with its
  // exponential, would be computed only to be discarded. Same result either way.
  if (all_lanes(ax < 1.0f)) return small;
  const V u = ax - 2.46f;
  V c = splat(-4.564932045e-07f);
  c = fmadd(c, u, splat(1.834056580e-06f));
  c = fmadd(c, u, splat(-4.289408902e-06f));
  c = fmadd(c, u, splat(1.595670907e-05f));
  c = fmadd(c, u, splat(-6.466663113e-05f));
  c = fmadd(c, u, splat(2.300751349e-04f));
  c = fmadd(c, u, splat(-7.860493899e-04f));
  c = fmadd(c, u, splat(2.618021692e-03f));
  c = fmadd(c, u, splat(-8.408349265e-03f));
  c = fmadd(c, u, splat(2.592251856e-02f));
  c = fmadd(c, u, splat(-7.638143395e-02f));
  c = fmadd(c, u, splat(2.138206721e-01f));
  const V mid = 1.0f - exp_v(-z) * c;
  V big = ax < 3.92f ? mid : splat(1.0f);
  big = copy_sign(big, x);
  return (ax < 1.0f) | (x != x) ? small : big;
}

inline V gelu_erf_v(V x) { return 0.5f * x * (1.0f + erf_v(x * 0.70710678118654752440f)); }

inline V gelu_tanh_v(V x) {
  const V u = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp_v(-2.0f * u));
}

// d/dx gelu(x) = Phi(x) + x phi(x), phi the standard normal density.
inline V gelu_erf_grad_v(V x) {
  const V cdf = 0.5f * (1.0f + erf_v(x * 0.70710678118654752440f));
  return fmadd(x * 0.39894228040143267794f, exp_v(-0.5f * x * x), cdf);
}

// With s = sigmoid(2u) = 0.5 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3):
// d/dx [x s] = s + 2 x s (1 - s) u'.
inline V gelu_tanh_grad_v(V x) {
  const V x2 = x * x;
  const V u = 0.79788456080286535588f * (x + 0.044715f * x2 * x);
  const V s = 1.0f / (1.0f + exp_v(-2.0f * u));
  const V du = 0.79788456080286535588f * (1.0f + (3.0f * 0.044715f) * x2);
  return s + 2.0f * x * s * (1.0f - s) * du;
}

inline V load_v(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
inline void store_v(float* p, V v) { __builtin_memcpy(p, &v, sizeof(V)); }

#ifndef MANTISSA_VM_LEVEL_LOAD_TAIL
// Lanes [0, m) of p (0 < m < kW), the others `fill`. A level with masked loads defines its own
// (and MANTISSA_VM_LEVEL_LOAD_TAIL) so that short rows, such as the ViT's 17 attention scores,
// are not loaded through a buffer: scalar stores read back as one vector cannot be forwarded and
// stall the load.
inline V load_tail(const float* p, int64_t m, float fill) {
  float buf[kW];
  for (int j = 0; j < kW; ++j) buf[j] = j < m ? p[j] : fill;
  return load_v(buf);
}
#endif

#ifndef MANTISSA_VM_LEVEL_STORE_TAIL
// Lanes [0, m) of v to p, through a buffer (a vector store forwards to the scalar loads; masked
// stores are microcoded on Zen 3).
inline void store_tail(float* p, V v, int64_t m) {
  float buf[kW];
  store_v(buf, v);
  for (int64_t j = 0; j < m; ++j) p[j] = buf[j];
}
#endif

#ifndef MANTISSA_VM_LEVEL_ZERO_TAIL
// Lanes [0, m) of v, the others +0.
inline V zero_tail(V v, int64_t m) {
  float buf[kW];
  store_v(buf, v);
  for (int64_t j = m; j < kW; ++j) buf[j] = 0.0f;
  return load_v(buf);
}
#endif

#ifndef MANTISSA_VM_LEVEL_SUM16
// The sum of 16 partial sums held in 16 / kW vectors (partial j in lane j % kW of vector
// j / kW), as the fixed tree: s[j] += s[j + w] for w = 8, 4, 2, 1.
inline float sum16(const V* acc) {
  float lanes[16];
  for (int a = 0; a < 16 / kW; ++a) store_v(lanes + a * kW, acc[a]);
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}
#endif

#ifndef MANTISSA_VM_LEVEL_MAX_LANES
// The NaN-propagating max of the lanes of m.
inline float max_lanes(V m) {
  float lanes[kW];
  store_v(lanes, m);
  float r = -__builtin_inff();
  for (int j = 0; j < kW; ++j) r = (lanes[j] > r || lanes[j] != lanes[j]) ? lanes[j] : r;
  return r;
}
#endif

// y = fn(x) over n elements; the tail goes through the same vector code, zero-padded.
template <V (*Fn)(V)>
void map_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store_v(y + i, Fn(load_v(x + i)));
  if (i < n) {
    float buf[kW] = {};
    const int64_t m = n - i;
    for (int64_t j = 0; j < m; ++j) buf[j] = x[i + j];
    store_v(buf, Fn(load_v(buf)));
    for (int64_t j = 0; j < m; ++j) y[i + j] = buf[j];
  }
}

// y = g * Fn(x): a gradient times a derivative, tail zero-padded as in map_array.
template <V (*Fn)(V)>
void grad_array(const float* g, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store_v(y + i, load_v(g + i) * Fn(load_v(x + i)));
  if (i < n) {
    float gb[kW] = {}, xb[kW] = {};
    const int64_t m = n - i;
    for (int64_t j = 0; j < m; ++j) {
      gb[j] = g[i + j];
      xb[j] = x[i + j];
    }
    store_v(gb, load_v(gb) * Fn(load_v(xb)));
    for (int64_t j = 0; j < m; ++j) y[i + j] = gb[j];
  }
}

// Lane j of the 16 partial sums holds the elements with index = j (mod 16) on every level,
// summed by the same tree (sum16), so every level gives the same bits.
float exp_shift_sum(const float* x, float shift, float* y, int64_t n) {
  constexpr int kAcc = 16 / kW;
  V acc[kAcc];
  for (int a = 0; a < kAcc; ++a) acc[a] = splat(0.0f);
  const V sh = splat(shift);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // Unrolled, so the partial sums stay in registers (as a loop they lived on the stack).
#pragma GCC unroll 4
    for (int a = 0; a < kAcc; ++a) {
      const V e = exp_v(load_v(x + i + a * kW) - sh);
      store_v(y + i + a * kW, e);
      acc[a] = acc[a] + e;
    }
  }
  // The unused lanes of a partial vector are padded with the shift (exp(0) = 1, no
  // underflow: exp(-inf) = 0 is an underflowing product, a ~150-cycle microcode assist on Intel
  // cores, which made a 17-score attention row cost 6 times a 16-score one) and set to +0
  // before the sum. Accumulators whose lanes would all be padding are skipped (adding +0
  // changes no sum).
  for (int a = 0; i + a * kW < n; ++a) {
    const int64_t at = i + a * kW, left = n - at;
    if (left >= kW) {
      const V e = exp_v(load_v(x + at) - sh);
      store_v(y + at, e);
      acc[a] = acc[a] + e;
    } else {
      const V e = exp_v(load_tail(x + at, left, shift) - sh);
      store_tail(y + at, e, left);
      acc[a] = acc[a] + zero_tail(e, left);
    }
  }
  return sum16(acc);
}

// NaN-propagating max (-inf for n = 0), the softmax shift. Max is exact, so the lane order
// does not matter for the result.
float max_nan(const float* x, int64_t n) {
  V m = splat(-__builtin_inff());
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V v = load_v(x + i);
    m = (v > m) | (v != v) ? v : m;
  }
  if (i < n) {
    const V v = load_tail(x + i, n - i, -__builtin_inff());
    m = (v > m) | (v != v) ? v : m;
  }
  return max_lanes(m);
}

constexpr VecMathTable kTable = {
    &map_array<exp_v>,
    &map_array<log_v>,
    &map_array<tanh_v>,
    &map_array<sigmoid_v>,
    &map_array<erf_v>,
    &map_array<gelu_erf_v>,
    &map_array<gelu_tanh_v>,
    &exp_shift_sum,
    &max_nan,
    &grad_array<gelu_erf_grad_v>,
    &grad_array<gelu_tanh_grad_v>,
    &map_array<silu_v>,
    &grad_array<silu_grad_v>,
};
