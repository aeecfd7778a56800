#pragma once
// Elementwise maps on a GPU (elementwise_kernels.cu): one grid-stride kernel per element type
// that applies an op code to up to three broadcast inputs. Plain declarations: included by the
// .cu and by the Tensor-level code in elementwise_cuda.cpp.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// x, y, z are the inputs in order; p0, p1 the op's numbers. Arithmetic happens in the input
// type's arithmetic type (fp32 for f32/f16/bf16, double for f64, int64 for integers and bool),
// as the CPU's pointwise does, and is rounded once into the output.
enum class EwOp : uint8_t {
  // one input
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kGeluTanh,
  kGeluErf,
  kSilu,        // x sigmoid(x)
  kClamp,       // min(max(x, p0), p1); NaN stays NaN (integers: p0/p1 already in range)
  kAddScalar,   // x + p0
  kMulScalar,   // x * p0
  kDivScalar,   // x / p0
  kRsubScalar,  // p0 - x
  kRdivScalar,  // p0 / x
  kPowScalar,   // x ^ p0
  kIsFinite,    // bool output
  // two inputs
  kAdd,  // x + p0 * y (p0 == 1: x + y)
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,   // bool output
  kTie,  // x == y or both NaN (bool output; amax's backward)
  // gradients, g first: (g, x) for unary ops, (g, y) where the derivative reads the output
  kReluBackward,     // x > 0 ? g : 0
  kAbsBackward,      // g * sign(x)
  kMulBackward,      // g * y (exp)
  kLogBackward,      // g / x
  kSqrtBackward,     // g / (y + y)
  kRsqrtBackward,    // -0.5 g y^3
  kTanhBackward,     // g (1 - y^2)
  kSigmoidBackward,  // g y (1 - y)
  kClampBackward,    // p0 <= x <= p1 ? g : 0
  kGeluTanhBackward,
  kGeluErfBackward,
  kSiluBackward,       // g s (1 + x (1 - s)), s = sigmoid(x)
  kPowScalarBackward,  // g p0 x^(p0-1)
  kRdivBackward,       // -g p0 / x^2
  // three inputs
  kDivOtherBackward,  // (g, x, y): -g x / y^2
  kMaximumBackward,   // (g, self, other): self == other ? g/2 : (other > self ? 0 : g)
  kMinimumBackward,   // (g, self, other): self == other ? g/2 : (other < self ? 0 : g)
  kPowBaseBackward,   // (g, x, y): y == 0 ? 0 : g y x^(y-1)
  kPowExpBackward,    // (g, x, y): x == 0 && y >= 0 ? 0 : g x^y log x
  kWhere,             // (c, x, y): c ? x : y, c a bool tensor (b8), x and y of the input type
};

struct EwLayout {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};       // the output's shape
  int64_t strides[3][kMaxDims] = {};  // each input's strides, 0 along broadcast dims
  bool linear = false;                // every input is the output's shape, contiguous
};

// out[i] = op(in...) over `numel` output elements (contiguous output). `type` is the element
// type of the inputs (where's condition excepted), `out_type` that type or b8.
void launch_elementwise(EwOp op, int inputs, const void* const* in, Scalar type, void* out,
                        Scalar out_type, const EwLayout& layout, int64_t numel, double p0,
                        double p1);

}  // namespace mantissa::cuda::detail
