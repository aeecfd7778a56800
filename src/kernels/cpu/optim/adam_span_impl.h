// The Adam/AdamW update over a span of A (float or double), written once and compiled per
// SIMD level: each adam_kernels_*.cpp includes this inside an anonymous namespace (so every
// level's copy has internal linkage and no inline code built for AVX-512 can be picked for
// another caller) after defining, for its vector type V of kW lanes of A:
//   V load_v(const A*), void store_v(A*, V), V sqrt_of(V), V max_nan(V, V)
// and the scalar sqrt_of(A) / max_nan(A, A), and include mantissa/core/bfloat16.h. No include
// guard: included once per level.
//
// Every lane applies the same IEEE operations in the same order as the scalar tail (the
// project builds with -std=c++20, so GCC contracts nothing into FMAs), so each element's
// result is bit-identical whatever level, span split or thread handles it.

// The TU's vectors F (float lanes) and D (double lanes): +, *, / and comparisons apply
// lane-wise (GCC vector extensions).
template <typename A, typename Vec>
struct SimdOf {
  using V = Vec;
  static constexpr int64_t kW = sizeof(Vec) / sizeof(A);
  static V load(const A* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static void store(A* p, V v) { std::memcpy(p, &v, sizeof(V)); }
};
template <typename A>
struct Simd;
template <>
struct Simd<float> : SimdOf<float, F> {};
template <>
struct Simd<double> : SimdOf<double, D> {};

inline float sqrt_of(float x) { return std::sqrt(x); }
inline double sqrt_of(double x) { return std::sqrt(x); }

// torch.maximum: the larger value, NaN when either is NaN (scalars and vectors alike).
template <typename X>
inline X max_nan(X a, X b) {
  return (a > b || a != a) ? a : b;
}

// One Adam step on X = A or V, term by term in torch's order.
template <bool kL2, bool kAmsgrad, typename X, typename A>
inline void adam_math(X& p, X d, X& m, X& v, X& v_max, const AdamCoeffs<A>& c) {
  d = d * c.sign;
  p = p * c.decay_factor;
  if constexpr (kL2) d = d + c.weight_decay * p;
  m = m * c.beta1 + c.one_minus_beta1 * d;
  v = v * c.beta2 + c.one_minus_beta2 * d * d;
  X second = v;
  if constexpr (kAmsgrad) {
    v_max = max_nan(v, v_max);
    second = v_max;
  }
  const X denom = sqrt_of(second) / c.bias_corr2_sqrt + c.eps;
  // torch's addcdiv computes self + (value * t1) / t2.
  p = p + c.neg_step_size * m / denom;
}

template <bool kL2, bool kAmsgrad, typename A>
void adam_span(const AdamCoeffs<A>& c, A* p, const A* g, A* m, A* v, A* v_max, int64_t n) {
  using S = Simd<A>;
  using V = typename S::V;
  int64_t i = 0;
  for (; i + S::kW <= n; i += S::kW) {
    V pv = S::load(p + i), mv = S::load(m + i), vv = S::load(v + i), xv{};
    if constexpr (kAmsgrad) xv = S::load(v_max + i);
    adam_math<kL2, kAmsgrad>(pv, S::load(g + i), mv, vv, xv, c);
    S::store(p + i, pv);
    S::store(m + i, mv);
    S::store(v + i, vv);
    if constexpr (kAmsgrad) S::store(v_max + i, xv);
  }
  for (; i < n; ++i) {
    A x = kAmsgrad ? v_max[i] : A(0);
    adam_math<kL2, kAmsgrad>(p[i], g[i], m[i], v[i], x, c);
    if constexpr (kAmsgrad) v_max[i] = x;
  }
}

// Elements [i, n) of a bfloat16 span one at a time (the bf16 span kernels' tails): widened,
// adam_math, rounded to bfloat16 as the vector lanes are.
template <bool kL2, bool kAmsgrad>
void adam_bf16_tail(const AdamCoeffs<float>& c, uint16_t* p, const uint16_t* g, uint16_t* m,
                    uint16_t* v, uint16_t* v_max, int64_t i, int64_t n) {
  for (; i < n; ++i) {
    float pf = bf16_bits_to_float(p[i]), mf = bf16_bits_to_float(m[i]);
    float vf = bf16_bits_to_float(v[i]), xf = kAmsgrad ? bf16_bits_to_float(v_max[i]) : 0.0f;
    adam_math<kL2, kAmsgrad>(pf, bf16_bits_to_float(g[i]), mf, vf, xf, c);
    p[i] = float_to_bf16_bits(pf);
    m[i] = float_to_bf16_bits(mf);
    v[i] = float_to_bf16_bits(vf);
    if constexpr (kAmsgrad) v_max[i] = float_to_bf16_bits(xf);
  }
}

template <typename A>
AdamSpanFn<A> adam_span_for(bool l2, bool amsgrad) {
  if (l2) return amsgrad ? &adam_span<true, true, A> : &adam_span<true, false, A>;
  return amsgrad ? &adam_span<false, true, A> : &adam_span<false, false, A>;
}
