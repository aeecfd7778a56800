// The rotary rows of rotary_kernels.h. Compiled at the baseline ISA, where the compiler cannot
// contract a product and a sum into one FMA, so each product is rounded as the composed ops
// round it. The cos and sin tables are first rounded to the element's dtype (cos.to(x.dtype())).
#include "kernels/cpu/rotary/rotary_kernels.h"

#include <vector>

#include "core/dtype_dispatch.h"

namespace mantissa::kernels::cpu {
namespace {

template <typename T>
using Acc = acc_t<T>;

template <typename T>
inline Acc<T> rounded(Acc<T> v) {
  return static_cast<Acc<T>>(static_cast<T>(v));
}

// The table in the element's arithmetic type, each entry rounded to T.
template <typename T>
std::vector<Acc<T>> rounded_table(const float* t, int64_t n) {
  std::vector<Acc<T>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = rounded<T>(static_cast<Acc<T>>(t[i]));
  return out;
}

template <typename T>
void forward_rows(const RotaryRows& p, const T* x, const int64_t* row_offset, T* out) {
  using A = Acc<T>;
  const int64_t D = p.dim, half = D / 2;
  const std::vector<A> c = rounded_table<T>(p.cos, p.positions * D);
  const std::vector<A> s = rounded_table<T>(p.sin, p.positions * D);
#pragma omp parallel for schedule(static) if (p.rows * D >= (int64_t{1} << 15))
  for (int64_t r = 0; r < p.rows; ++r) {
    const T* xr = x + row_offset[r];
    T* o = out + r * D;
    const A* cr = c.data() + (r % p.positions) * D;
    const A* sr = s.data() + (r % p.positions) * D;
    for (int64_t j = 0; j < half; ++j) {
      const A x1 = static_cast<A>(xr[j]), x2 = static_cast<A>(xr[j + half]);
      o[j] = static_cast<T>(rounded<T>(x1 * cr[j]) + rounded<T>(-x2 * sr[j]));
      o[j + half] = static_cast<T>(rounded<T>(x2 * cr[j + half]) + rounded<T>(x1 * sr[j + half]));
    }
  }
}

template <typename T>
void backward_rows(const RotaryRows& p, const T* g, T* dx) {
  using A = Acc<T>;
  const int64_t D = p.dim, half = D / 2;
  const std::vector<A> c = rounded_table<T>(p.cos, p.positions * D);
  const std::vector<A> s = rounded_table<T>(p.sin, p.positions * D);
#pragma omp parallel for schedule(static) if (p.rows * D >= (int64_t{1} << 15))
  for (int64_t r = 0; r < p.rows; ++r) {
    const T* gr = g + r * D;
    T* o = dx + r * D;
    const A* cr = c.data() + (r % p.positions) * D;
    const A* sr = s.data() + (r % p.positions) * D;
    for (int64_t j = 0; j < half; ++j) {
      const A g1 = static_cast<A>(gr[j]), g2 = static_cast<A>(gr[j + half]);
      o[j] = static_cast<T>(rounded<T>(g1 * cr[j]) + rounded<T>(g2 * sr[j + half]));
      o[j + half] = static_cast<T>(rounded<T>(g2 * cr[j + half]) - rounded<T>(g1 * sr[j]));
    }
  }
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
