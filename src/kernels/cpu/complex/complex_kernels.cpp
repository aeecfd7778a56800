#include "kernels/cpu/complex/complex_kernels.h"

#include <cmath>
#include <complex>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

// Calls fn with a float or a double tag for complex64 / complex128.
template <typename F>
void dispatch_complex(DType dtype, F&& fn) {
  if (dtype == kComplex64) return fn(float{});
  if (dtype == kComplex128) return fn(double{});
  fail("complex", "expected complex64 or complex128, got {}", dtype.name());
}

template <typename R>
const std::complex<R>* cz(const void* p) {
  return static_cast<const std::complex<R>*>(p);
}
template <typename R>
std::complex<R>* mz(void* p) {
  return static_cast<std::complex<R>*>(p);
}

}  // namespace

void complex_binary(DType dtype, ComplexBinaryOp op, const void* a, const void* b, void* out,
                    int64_t n, double alpha) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* x = cz<R>(a);
    const auto* y = cz<R>(b);
    auto* o = mz<R>(out);
    const R al = static_cast<R>(alpha);
    switch (op) {
      case ComplexBinaryOp::kAdd:
        for (int64_t i = 0; i < n; ++i) o[i] = alpha == 1.0 ? x[i] + y[i] : x[i] + al * y[i];
        break;
      case ComplexBinaryOp::kMul:
        for (int64_t i = 0; i < n; ++i) o[i] = x[i] * y[i];
        break;
      case ComplexBinaryOp::kDiv:
        for (int64_t i = 0; i < n; ++i) o[i] = x[i] / y[i];
        break;
    }
  });
}

void complex_scale(DType dtype, const void* z, double s, void* out, int64_t n) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* x = cz<R>(z);
    auto* o = mz<R>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * static_cast<R>(s);
  });
}

void complex_gemm(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                  void* c) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* A = cz<R>(a);
    const auto* B = cz<R>(b);
    auto* C = mz<R>(c);
#pragma omp parallel for schedule(static) if (m * n * k > (1 << 16))
    for (int64_t i = 0; i < m; ++i) {
      std::vector<std::complex<R>> row(static_cast<size_t>(n));
      for (int64_t p = 0; p < k; ++p) {
        const std::complex<R> av = A[i * k + p];
        const std::complex<R>* brow = B + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
      for (int64_t j = 0; j < n; ++j) C[i * n + j] = row[j];
    }
  });
}

void complex_unary(DType dtype, ComplexUnaryOp op, const void* z, void* out, int64_t n) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* x = cz<R>(z);
    if (op == ComplexUnaryOp::kConj) {
      auto* o = mz<R>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = std::conj(x[i]);
      return;
    }
    auto* o = static_cast<R*>(out);
    for (int64_t i = 0; i < n; ++i) {
      switch (op) {
        case ComplexUnaryOp::kReal:
          o[i] = x[i].real();
          break;
        case ComplexUnaryOp::kImag:
          o[i] = x[i].imag();
          break;
        case ComplexUnaryOp::kAbs:
          o[i] = std::abs(x[i]);  // hypot: no overflow for large parts
          break;
        case ComplexUnaryOp::kAngle:
          o[i] = std::arg(x[i]);
          break;
        case ComplexUnaryOp::kConj:
          break;
      }
    }
  });
}

void complex_from_parts(DType dtype, const void* re, const void* im, void* out, int64_t n) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* r = static_cast<const R*>(re);
    const auto* m = static_cast<const R*>(im);
    auto* o = mz<R>(out);
    for (int64_t i = 0; i < n; ++i)
      o[i] = std::complex<R>(r != nullptr ? r[i] : R(0), m != nullptr ? m[i] : R(0));
  });
}

void complex_abs_backward(DType dtype, const void* g, const void* z, void* out, int64_t n) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* gv = static_cast<const R*>(g);
    const auto* x = cz<R>(z);
    auto* o = mz<R>(out);
    for (int64_t i = 0; i < n; ++i) {
      const R a = std::abs(x[i]);
      o[i] = a == R(0) ? std::complex<R>(0) : gv[i] * (x[i] / a);
    }
  });
}

void complex_angle_backward(DType dtype, const void* g, const void* z, void* out, int64_t n) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* gv = static_cast<const R*>(g);
    const auto* x = cz<R>(z);
    auto* o = mz<R>(out);
    for (int64_t i = 0; i < n; ++i) {
      const R a2 = std::norm(x[i]);
      // d angle / dx + i d angle / dy = (-y + i x) / |z|^2 = i z / |z|^2
      o[i] =
          a2 == R(0) ? std::complex<R>(0) : gv[i] * std::complex<R>(-x[i].imag(), x[i].real()) / a2;
    }
  });
}

void complex_sum_to(DType dtype, const void* g, const Shape& g_shape, void* out,
                    const Shape& out_shape) {
  dispatch_complex(dtype, [&](auto tag) {
    using R = decltype(tag);
    const auto* gv = cz<R>(g);
    auto* o = mz<R>(out);
    const int64_t rank = static_cast<int64_t>(g_shape.size());
    const int64_t lead = rank - static_cast<int64_t>(out_shape.size());
    const Shape ostr = contiguous_strides(out_shape);
    const int64_t on = numel_of(out_shape), gn = numel_of(g_shape);
    for (int64_t i = 0; i < on; ++i) o[i] = std::complex<R>(0);
    for (int64_t p = 0; p < gn; ++p) {
      int64_t rem = p, off = 0;
      for (int64_t q = rank - 1; q >= 0; --q) {
        const int64_t c = rem % g_shape[q];
        rem /= g_shape[q];
        const int64_t oq = q - lead;
        if (oq >= 0 && out_shape[oq] != 1) off += c * ostr[oq];
      }
      o[off] += gv[p];
    }
  });
}

}  // namespace mantissa::kernels
