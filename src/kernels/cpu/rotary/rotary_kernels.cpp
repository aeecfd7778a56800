// The rotary rows of rotary_kernels.h. Compiled at the baseline ISA, where the compiler cannot
// contract a product and a sum into one FMA, so each product is rounded as the composed ops
// round it. The cos and sin tables are first rounded to the element's dtype (cos.to(x.dtype())).
// fp16 and bf16 rows are worked in fp32 chunks of rows, widened and rounded by the bulk SIMD
// conversions (widen_block, narrow_block) rather than one element at a time.
#include "kernels/cpu/rotary/rotary_kernels.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"

namespace mantissa::kernels::cpu {
namespace {

// Rows per chunk: about 16 KiB of fp32 per buffer.
constexpr int64_t kChunkElements = 4096;

// v rounded to T in place (nothing to do for fp32).
template <typename T>
void round_to(float* v, T* tmp, int64_t n) {
  if constexpr (kIsNarrowFloat<T>) {
    narrow_block(v, tmp, n);
    widen_block(tmp, v, n);
  }
}

// The table in T's arithmetic type, each entry rounded to T.
template <typename T>
std::vector<acc_t<T>> rounded_table(const float* t, int64_t n) {
  using A = acc_t<T>;
  std::vector<A> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<A>(static_cast<T>(static_cast<A>(t[i])));
  return out;
}

// Rows [r0, r0 + rows) held in v (T's arithmetic type): the two products of every element,
// each rounded to T, then their combination rounded into out. c and s are the tables.
template <typename T, typename Combine>
void chunk(const RotaryRows& p, int64_t r0, int64_t rows, const acc_t<T>* c, const acc_t<T>* s,
           acc_t<T>* v, acc_t<T>* a, acc_t<T>* b, T* tmp, Combine combine, T* out) {
  using A = acc_t<T>;
  const int64_t D = p.dim, half = D / 2, n = rows * D;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t pos = (r0 + i) % p.positions;
    combine.products(v + i * D, c + pos * D, s + pos * D, a + i * D, b + i * D, half);
  }
  if constexpr (std::is_same_v<A, float>) {
    round_to<T>(a, tmp, n);
    round_to<T>(b, tmp, n);
  }
  for (int64_t i = 0; i < rows; ++i) combine.sum(a + i * D, b + i * D, v + i * D, half);
  if constexpr (std::is_same_v<A, float>)
    narrow_block(v, out + r0 * D, n);
  else
    std::copy(v, v + n, out + r0 * D);
}

// Forward: a = x c, b = rotate_half(x) s = (-x2 s1, x1 s2); y = a + b.
struct ForwardRow {
  template <typename A>
  void products(const A* x, const A* c, const A* s, A* a, A* b, int64_t half) const {
    for (int64_t j = 0; j < 2 * half; ++j) a[j] = x[j] * c[j];
    for (int64_t j = 0; j < half; ++j) {
      b[j] = -x[j + half] * s[j];
      b[j + half] = x[j] * s[j + half];
    }
  }
  template <typename A>
  void sum(const A* a, const A* b, A* y, int64_t half) const {
    for (int64_t j = 0; j < 2 * half; ++j) y[j] = a[j] + b[j];
  }
};

// Backward: a = g c, b = g s; dx = a + rotate_half^T(b) = (a1 + b2, a2 - b1).
struct BackwardRow {
  template <typename A>
  void products(const A* g, const A* c, const A* s, A* a, A* b, int64_t half) const {
    for (int64_t j = 0; j < 2 * half; ++j) {
      a[j] = g[j] * c[j];
      b[j] = g[j] * s[j];
    }
  }
  template <typename A>
  void sum(const A* a, const A* b, A* dx, int64_t half) const {
    for (int64_t j = 0; j < half; ++j) {
      dx[j] = a[j] + b[j + half];
      dx[j + half] = a[j + half] - b[j];
    }
  }
};

// Chunks of rows over the threads; load(r0, rows, v) fills v with the rows in T's arithmetic
// type.
template <typename T, typename Combine, typename Load>
void run(const RotaryRows& p, Combine combine, Load load, T* out) {
  using A = acc_t<T>;
  const int64_t D = p.dim;
  const std::vector<A> c = rounded_table<T>(p.cos, p.positions * D);
  const std::vector<A> s = rounded_table<T>(p.sin, p.positions * D);
  const int64_t rows_per = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(D, 1));
  const int64_t chunks = (p.rows + rows_per - 1) / rows_per;
#pragma omp parallel if (p.rows * D >= (int64_t{1} << 15))
  {
    const auto n = static_cast<size_t>(rows_per * D);
    std::vector<A> v(n), a(n), b(n);
    std::vector<T> tmp(n);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t r0 = k * rows_per, rows = std::min(rows_per, p.rows - r0);
      load(r0, rows, v.data());
      chunk<T>(p, r0, rows, c.data(), s.data(), v.data(), a.data(), b.data(), tmp.data(), combine,
               out);
    }
  }
}

template <typename T>
void forward_rows(const RotaryRows& p, const T* x, const int64_t* row_offset, T* out) {
  using A = acc_t<T>;
  const int64_t D = p.dim;
  run<T>(
      p, ForwardRow{},
      [&](int64_t r0, int64_t rows, A* v) {
        for (int64_t i = 0; i < rows; ++i) {
          const T* xr = x + row_offset[r0 + i];
          if constexpr (std::is_same_v<A, float>)
            widen_block(xr, v + i * D, D);
          else
            std::copy(xr, xr + D, v + i * D);
        }
      },
      out);
}

template <typename T>
void backward_rows(const RotaryRows& p, const T* g, T* dx) {
  using A = acc_t<T>;
  const int64_t D = p.dim;
  run<T>(
      p, BackwardRow{},
      [&](int64_t r0, int64_t rows, A* v) {
        if constexpr (std::is_same_v<A, float>)
          widen_block(g + r0 * D, v, rows * D);
        else
          std::copy(g + r0 * D, g + (r0 + rows) * D, v);
      },
      dx);
}

}  // namespace

void rotary_forward(const RotaryRows& p, DType dtype, const void* x, const int64_t* row_offset,
                    void* out) {
  dispatch_floating(dtype, "apply_rotary_embedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_rows<T>(p, static_cast<const T*>(x), row_offset, static_cast<T*>(out));
  });
}

void rotary_backward(const RotaryRows& p, DType dtype, const void* g, void* dx) {
  dispatch_floating(dtype, "apply_rotary_embedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_rows<T>(p, static_cast<const T*>(g), static_cast<T*>(dx));
  });
}

}  // namespace mantissa::kernels::cpu
