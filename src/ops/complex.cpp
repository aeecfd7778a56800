// Complex tensors: complex/real/imag/conj/angle, and the complex paths of add, sub, mul, div,
// matmul and abs (ops/complex_arith.h). Gradients follow PyTorch's convention (docs/complex.md):
// for s = f(z) and an upstream gradient G = dL/ds*, the input gets
// conj(G) * ds/dz* + G * conj(ds/dz); for holomorphic f that is G * conj(f'(z)). A real input
// of a complex op is cast to complex first, and the cast hands it the real part.
#include "mantissa/ops/complex.h"

#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/complex_parts.h"
#include "kernels/cpu/complex/complex_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/sum_to.h"
#include "ops/complex_arith.h"

namespace mantissa {
namespace {

using kernels::ComplexBinaryOp;
using kernels::ComplexUnaryOp;

Tensor dense(const Tensor& t) { return t.detach().contiguous(); }

// Elementwise on same-shape contiguous complex tensors (no graph).
Tensor binary(ComplexBinaryOp op, const Tensor& x, const Tensor& y, double alpha = 1.0) {
  Tensor a = dense(x), b = dense(y);
  Tensor out = empty(a.shape(), a.dtype());
  kernels::complex_binary(a.dtype(), op, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(),
                          alpha);
  return out;
}

Tensor unary(ComplexUnaryOp op, const Tensor& z) {
  Tensor c = dense(z);
  const DType out_dtype =
      op == ComplexUnaryOp::kConj ? c.dtype() : complex_component_dtype(c.dtype());
  Tensor out = empty(c.shape(), out_dtype);
  kernels::complex_unary(c.dtype(), op, c.data_ptr(), out.data_ptr(), c.numel());
  return out;
}

Tensor scale(const Tensor& z, double s) {
  Tensor c = dense(z);
  Tensor out = empty(c.shape(), c.dtype());
  kernels::complex_scale(c.dtype(), c.data_ptr(), s, out.data_ptr(), c.numel());
  return out;
}

Tensor from_parts(DType dtype, const Tensor& re, const Tensor& im) {
  const Tensor r = re.defined() ? dense(re) : Tensor();
  const Tensor m = im.defined() ? dense(im) : Tensor();
  const Shape shape = r.defined() ? r.shape() : m.shape();
  Tensor out = empty(shape, dtype);
  kernels::complex_from_parts(dtype, r.defined() ? r.data_ptr() : nullptr,
                              m.defined() ? m.data_ptr() : nullptr, out.data_ptr(),
                              numel_of(shape));
  return out;
}

Tensor complex_sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  Tensor c = dense(g);
  Tensor out = empty(shape, c.dtype());
  kernels::complex_sum_to(c.dtype(), c.data_ptr(), c.shape(), out.data_ptr(), shape);
  return out;
}

// A 2-D complex matrix product of contiguous operands.
Tensor gemm(const Tensor& a, const Tensor& b) {
  Tensor x = dense(a), y = dense(b);
  Tensor out = empty({x.size(0), y.size(1)}, x.dtype());
  kernels::complex_gemm(x.dtype(), x.size(0), y.size(1), x.size(1), x.data_ptr(), y.data_ptr(),
                        out.data_ptr());
  return out;
}

// conj(x)^T, contiguous.
Tensor adjoint(const Tensor& x) { return unary(ComplexUnaryOp::kConj, x).t().contiguous(); }

void check_complex(const Tensor& z, const char* name) {
  MANTISSA_CHECK(z.dtype().is_complex(), name, "expected a complex tensor, got {}",
                 z.dtype().name());
}

}  // namespace

namespace detail {

Tensor complex_arith(ComplexArith op, const Tensor& a_in, const Tensor& b_in, double alpha) {
  static constexpr const char* kNames[] = {"add", "mul", "div"};
  static constexpr const char* kNodes[] = {"AddBackward", "MulBackward", "DivBackward"};
  const char* name = kNames[static_cast<int>(op)];
  const DType dt = promote_types(a_in.dtype(), b_in.dtype());
  const Tensor a = a_in.to(dt), b = b_in.to(dt);  // graph casts: real inputs get real parts
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const Tensor ae = a.detach().expand(shape).contiguous();
  const Tensor be = b.detach().expand(shape).contiguous();
  const ComplexBinaryOp kop = op == ComplexArith::kAdd   ? ComplexBinaryOp::kAdd
                              : op == ComplexArith::kMul ? ComplexBinaryOp::kMul
                                                         : ComplexBinaryOp::kDiv;
  Tensor out = binary(kop, ae, be, alpha);
  if (!autograd::needs_grad(a, b)) return out;
  const Shape sa = a.shape(), sb = b.shape();
  const Tensor saved_out = op == ComplexArith::kDiv ? out.detach() : Tensor();
  // What the gradients read: mul's of a reads b and of b reads a; div's of a reads b and of b
  // reads b and the output; add's nothing.
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  std::vector<Tensor> saved;
  if (op == ComplexArith::kMul) saved = {need_b ? ae : Tensor(), need_a ? be : Tensor()};
  if (op == ComplexArith::kDiv) saved = {be, need_b ? saved_out : Tensor()};
  return autograd::record(
      out, {a, b}, saved, kNodes[static_cast<int>(op)],
      [op, sa, sb, ae, be, saved_out, alpha](const Tensor& grad) {
        const Tensor g = dense(grad);
        Tensor ga, gb;
        switch (op) {
          case ComplexArith::kAdd:
            ga = g;
            gb = alpha == 1.0 ? g : scale(g, alpha);
            break;
          case ComplexArith::kMul:  // d(ab)/da = b: G * conj(b)
            ga = binary(ComplexBinaryOp::kMul, g, unary(ComplexUnaryOp::kConj, be));
            gb = binary(ComplexBinaryOp::kMul, g, unary(ComplexUnaryOp::kConj, ae));
            break;
          case ComplexArith::kDiv:  // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
            ga = binary(ComplexBinaryOp::kDiv, g, unary(ComplexUnaryOp::kConj, be));
            gb = scale(
                binary(ComplexBinaryOp::kMul, g,
                       unary(ComplexUnaryOp::kConj, binary(ComplexBinaryOp::kDiv, saved_out, be))),
                -1.0);
            break;
        }
        return std::vector<Tensor>{complex_sum_to(ga, sa), complex_sum_to(gb, sb)};
      });
}

Tensor complex_add_scalar(const Tensor& a, double s) {
  Tensor c = dense(a);
  Tensor sc =
      from_parts(c.dtype(), full(c.shape(), s, complex_component_dtype(c.dtype())), Tensor());
  Tensor out = binary(ComplexBinaryOp::kAdd, c, sc);
  return autograd::record(out, {a}, "AddBackward",
                          [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor complex_mul_scalar(const Tensor& a, double s) {
  Tensor out = scale(a, s);
  return autograd::record(out, {a}, "MulBackward",
                          [s](const Tensor& g) { return std::vector<Tensor>{scale(g, s)}; });
}

Tensor complex_matmul(const Tensor& a_in, const Tensor& b_in) {
  MANTISSA_CHECK(a_in.dim() == 2 && b_in.dim() == 2, "matmul",
                 "complex matmul takes two 2-D matrices, got shapes {} and {} (not supported "
                 "for complex: batched or 1-D operands)",
                 shape_str(a_in.shape()), shape_str(b_in.shape()));
  MANTISSA_CHECK(a_in.size(1) == b_in.size(0), "matmul",
                 "shapes {} and {} cannot be multiplied ({} != {})", shape_str(a_in.shape()),
                 shape_str(b_in.shape()), a_in.size(1), b_in.size(0));
  const DType dt = promote_types(a_in.dtype(), b_in.dtype());
  const Tensor a = a_in.to(dt), b = b_in.to(dt);
  Tensor out = gemm(a, b);
  if (!autograd::needs_grad(a, b)) return out;
  // dA = G B^H, dB = A^H G (the holomorphic rule G * conj(f') in matrix form).
  return autograd::record(out, {a, b},
                          {b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()},
                          "MatmulBackward", [x = a.detach(), y = b.detach()](const Tensor& g) {
                            return std::vector<Tensor>{gemm(g, adjoint(y)), gemm(adjoint(x), g)};
                          });
}

Tensor complex_abs(const Tensor& z) {
  Tensor out = unary(ComplexUnaryOp::kAbs, z);
  if (!autograd::needs_grad(z)) return out;
  return autograd::record(out, {z}, {z}, "AbsBackward", [x = z.detach()](const Tensor& grad) {
    const Tensor g = dense(grad), c = dense(x);
    Tensor dz = empty(c.shape(), c.dtype());
    kernels::complex_abs_backward(c.dtype(), g.data_ptr(), c.data_ptr(), dz.data_ptr(), c.numel());
    return std::vector<Tensor>{dz};
  });
}

}  // namespace detail

Tensor complex(const Tensor& re, const Tensor& im) {
  MANTISSA_AUTOCAST("complex", complex, re, im);
  MANTISSA_CHECK(re.dtype() == im.dtype() && (re.dtype() == kFloat32 || re.dtype() == kFloat64),
                 "complex",
                 "expected real and imag of one dtype, float32 (complex64) or float64 "
                 "(complex128), got {} and {}",
                 re.dtype().name(), im.dtype().name());
  const Shape shape = broadcast_shapes(re.shape(), im.shape(), "complex");
  const DType dt = complex_dtype_for(re.dtype());
  Tensor out = from_parts(dt, re.detach().expand(shape).contiguous(),
                          im.detach().expand(shape).contiguous());
  if (!autograd::needs_grad(re, im)) return out;
  return autograd::record(out, {re, im}, "ComplexBackward",
                          [sr = re.shape(), si = im.shape()](const Tensor& g) {
                            return std::vector<Tensor>{sum_to(unary(ComplexUnaryOp::kReal, g), sr),
                                                       sum_to(unary(ComplexUnaryOp::kImag, g), si)};
                          });
}

Tensor real(const Tensor& z) {
  MANTISSA_AUTOCAST("real", real, z);
  if (!z.dtype().is_complex()) return z;  // torch.real of a real tensor is the tensor
  Tensor out = unary(ComplexUnaryOp::kReal, z);
  return autograd::record(out, {z}, "RealBackward", [dt = z.dtype()](const Tensor& g) {
    return std::vector<Tensor>{from_parts(dt, g, Tensor())};
  });
}

Tensor imag(const Tensor& z) {
  MANTISSA_AUTOCAST("imag", imag, z);
  MANTISSA_CHECK(z.dtype().is_complex(), "imag",
                 "imag is not implemented for real tensors (dtype {}); a real tensor's "
                 "imaginary part is zero",
                 z.dtype().name());
  Tensor out = unary(ComplexUnaryOp::kImag, z);
  // s = Im z: the input gets i * G.
  return autograd::record(out, {z}, "ImagBackward", [dt = z.dtype()](const Tensor& g) {
    return std::vector<Tensor>{from_parts(dt, Tensor(), g)};
  });
}

Tensor conj(const Tensor& z) {
  MANTISSA_AUTOCAST("conj", conj, z);
  if (!z.dtype().is_complex()) return z;
  Tensor out = unary(ComplexUnaryOp::kConj, z);
  return autograd::record(out, {z}, "ConjBackward", [](const Tensor& g) {
    return std::vector<Tensor>{unary(ComplexUnaryOp::kConj, g)};
  });
}

Tensor angle(const Tensor& z) {
  MANTISSA_AUTOCAST("angle", angle, z);
  check_complex(z, "angle");
  Tensor out = unary(ComplexUnaryOp::kAngle, z);
  if (!autograd::needs_grad(z)) return out;
  return autograd::record(out, {z}, {z}, "AngleBackward", [x = z.detach()](const Tensor& grad) {
    const Tensor g = dense(grad), c = dense(x);
    Tensor dz = empty(c.shape(), c.dtype());
    kernels::complex_angle_backward(c.dtype(), g.data_ptr(), c.data_ptr(), dz.data_ptr(),
                                    c.numel());
    return std::vector<Tensor>{dz};
  });
}

}  // namespace mantissa
