// The elementwise kernel: one grid-stride loop per (input type, output type), the op chosen by
// a switch on a code that is the same for every thread (no divergence).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/elementwise/elementwise_kernels.h"

namespace mantissa::cuda::detail {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// base^exp in integers (negative exponents: only |base| == 1 is non-zero), as the CPU op.
__device__ long long int_pow(long long base, long long e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  unsigned long long r = 1, b = static_cast<unsigned long long>(base);
  while (e != 0) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<long long>(r);
}

template <typename A>
__device__ __forceinline__ A apply(EwOp op, A x, A y, A z, double p0, double p1) {
  constexpr bool F = kIsFloatAcc<A>;
  switch (op) {
    case EwOp::kNeg:
      return -x;
    case EwOp::kAbs:
      if constexpr (F)
        return fabs(x);
      else
        return x < A(0) ? A(-x) : x;
    case EwOp::kRelu:
      return x <= A(0) ? A(0) : x;  // NaN passes
    case EwOp::kClamp: {
      if constexpr (F) {
        const A lo = static_cast<A>(p0), hi = static_cast<A>(p1);
        if (x != x) return x;
        const A v = x < lo ? lo : x;
        return v > hi ? hi : v;
      } else {
        // p0/p1 are already clipped to the type's range on the host; compare in double.
        const A v = static_cast<double>(x) < p0 ? static_cast<A>(p0) : x;
        return static_cast<double>(v) > p1 ? static_cast<A>(p1) : v;
      }
    }
    case EwOp::kAddScalar:
      return x + static_cast<A>(p0);
    case EwOp::kMulScalar:
      return x * static_cast<A>(p0);
    case EwOp::kDivScalar:
      return x / static_cast<A>(p0);
    case EwOp::kRsubScalar:
      return static_cast<A>(p0) - x;
    case EwOp::kRdivScalar:
      return static_cast<A>(p0) / x;
    case EwOp::kPowScalar:
      if (p0 == 2.0) return x * x;
      if constexpr (F)
        return d_pow(x, static_cast<A>(p0));
      else
        return int_pow(x, static_cast<A>(p0));
    case EwOp::kIsFinite:
      if constexpr (F)
        return isfinite(x) ? A(1) : A(0);
      else
        return A(1);
    case EwOp::kAdd:
      return p0 == 1.0 ? x + y : x + static_cast<A>(p0) * y;
    case EwOp::kMul:
      return x * y;
    case EwOp::kMaximum:
      return (x > y || x != x) ? x : y;
    case EwOp::kMinimum:
      return (x < y || x != x) ? x : y;
    case EwOp::kPow:
      if constexpr (F)
        return d_pow(x, y);
      else
        return int_pow(x, y);
    case EwOp::kEq:
      return x == y ? A(1) : A(0);
    case EwOp::kNe:
      return x != y ? A(1) : A(0);
    case EwOp::kLt:
      return x < y ? A(1) : A(0);
    case EwOp::kLe:
      return x <= y ? A(1) : A(0);
    case EwOp::kGt:
      return x > y ? A(1) : A(0);
    case EwOp::kGe:
      return x >= y ? A(1) : A(0);
    case EwOp::kTie:
      return (x == y || (x != x && y != y)) ? A(1) : A(0);
    default:
      break;
  }
  if constexpr (F) {
    switch (op) {
      case EwOp::kExp:
        return d_exp(x);
      case EwOp::kLog:
        return d_log(x);
      case EwOp::kSqrt:
        return d_sqrt(x);
      case EwOp::kRsqrt:
        return A(1) / d_sqrt(x);
      case EwOp::kTanh:
        return d_tanh(x);
      case EwOp::kSigmoid:
        return A(1) / (A(1) + d_exp(-x));  // exp overflow: 1/inf = 0
      case EwOp::kGeluTanh: {
        // 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
        const A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
        return x / (A(1) + d_exp(A(-2) * u));
      }
      case EwOp::kSilu:
        return x * (A(1) / (A(1) + d_exp(-x)));
      case EwOp::kGeluErf:
        return A(0.5) * x * (A(1) + d_erf(x * A(kSqrtHalf)));
      case EwOp::kDiv:
        return x / y;
      // gradients: x is g
      case EwOp::kReluBackward:
        return y > A(0) ? x : A(0);
      case EwOp::kAbsBackward:
        return y > A(0) ? x : (y < A(0) ? -x : A(0));
      case EwOp::kMulBackward:
        return x * y;
      case EwOp::kLogBackward:
        return x / y;
      case EwOp::kSqrtBackward:
        return x / (y + y);
      case EwOp::kRsqrtBackward:
        return A(-0.5) * x * y * y * y;
      case EwOp::kTanhBackward:
        return x * (A(1) - y * y);
      case EwOp::kSigmoidBackward:
        return x * y * (A(1) - y);
      case EwOp::kClampBackward:
        return (y >= static_cast<A>(p0) && y <= static_cast<A>(p1)) ? x : A(0);
      case EwOp::kGeluTanhBackward: {
        // d/dx [x s] = s + 2 x s (1 - s) u', s = sigmoid(2u)
        const A x2 = y * y;
        const A s = A(1) / (A(1) + d_exp(A(-2 * kSqrt2OverPi) * (y + A(kGeluCubic) * x2 * y)));
        const A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluCubic) * x2);
        return x * (s + A(2) * y * s * (A(1) - s) * du);
      }
      case EwOp::kGeluErfBackward: {
        const A cdf = A(0.5) * (A(1) + d_erf(y * A(kSqrtHalf)));
        const A pdf = A(kInvSqrt2Pi) * d_exp(A(-0.5) * y * y);
        return x * (cdf + y * pdf);
      }
      case EwOp::kSiluBackward: {
        const A s = A(1) / (A(1) + d_exp(-y));
        return x * (s * (A(1) + y * (A(1) - s)));
      }
      case EwOp::kPowScalarBackward:
        if (p0 == 2.0) return x * (y + y);
        return x * static_cast<A>(p0) * d_pow(y, static_cast<A>(p0 - 1.0));
      case EwOp::kRdivBackward:
        return -x * static_cast<A>(p0) / (y * y);
      case EwOp::kDivOtherBackward:
        return -x * y / (z * z);
      case EwOp::kMaximumBackward:
        return y == z ? x * A(0.5) : (z > y ? A(0) : x);
      case EwOp::kMinimumBackward:
        return y == z ? x * A(0.5) : (z < y ? A(0) : x);
      case EwOp::kPowBaseBackward:
        return z == A(0) ? A(0) : x * z * d_pow(y, z - A(1));
      case EwOp::kPowExpBackward:
        return (y == A(0) && z >= A(0)) ? A(0) : x * d_pow(y, z) * d_log(y);
      default:
        break;
    }
  }
  return A(0);
}

template <Scalar S, Scalar O>
__global__ void elementwise_kernel(EwOp op, int nin, const void* in0, const void* in1,
                                   const void* in2, void* out, EwLayout l, int64_t n, double p0,
                                   double p1) {
  using T = elem_t<S>;
  using A = acc_t<S>;
  const T* a = static_cast<const T*>(in0);
  const T* b = static_cast<const T*>(in1);
  const T* c = static_cast<const T*>(in2);
  elem_t<O>* o = static_cast<elem_t<O>*>(out);
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t o0 = i, o1 = i, o2 = i;
    if (!l.linear) {
      o0 = o1 = o2 = 0;
      int64_t rest = i;
      for (int d = l.dims - 1; d >= 0; --d) {
        const int64_t idx = rest % l.sizes[d];
        rest /= l.sizes[d];
        o0 += idx * l.strides[0][d];
        o1 += idx * l.strides[1][d];
        o2 += idx * l.strides[2][d];
      }
    }
    A r;
    if (op == EwOp::kWhere) {
      r = static_cast<const unsigned char*>(in0)[o0] != 0 ? load<S>(b, o1) : load<S>(c, o2);
    } else {
      const A x = load<S>(a, o0);
      const A y = nin > 1 ? load<S>(b, o1) : A(0);
      const A z = nin > 2 ? load<S>(c, o2) : A(0);
      r = apply<A>(op, x, y, z, p0, p1);
    }
    store<O>(o, i, r);
  }
}

}  // namespace

void launch_elementwise(EwOp op, int inputs, const void* const* in, Scalar type, void* out,
                        Scalar out_type, const EwLayout& layout, int64_t numel, double p0,
                        double p1) {
  if (numel == 0) return;
  const void* i0 = in[0];
  const void* i1 = inputs > 1 ? in[1] : nullptr;
  const void* i2 = inputs > 2 ? in[2] : nullptr;
  const unsigned grid = grid_for(numel);
  MANTISSA_CUDA_DISPATCH_ALL(type, S, {
    if (out_type == Scalar::b8 && S != Scalar::b8) {
      elementwise_kernel<S, Scalar::b8>
          <<<grid, 256, 0, current_stream()>>>(op, inputs, i0, i1, i2, out, layout, numel, p0, p1);
    } else {
      elementwise_kernel<S, S>
          <<<grid, 256, 0, current_stream()>>>(op, inputs, i0, i1, i2, out, layout, numel, p0, p1);
    }
  })
  check_kernel_launch("elementwise");
}

}  // namespace mantissa::cuda::detail
