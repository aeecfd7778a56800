// batch_norm: per-channel statistics, the running-statistics update and the full backward.
// Loops run per channel (channels split across threads) over the [N, C, S] view of the input.
// Values are loaded as A = float (double for f64 inputs); per-channel sums accumulate in
// double, so the statistics of a bf16/fp16 batch are at least as good as fp32 ones.
#include "mantissa/ops/batch_norm.h"

#include <cmath>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

struct BnDims {
  int64_t n, c, s;                     // input viewed as [n, c, s]
  int64_t m() const { return n * s; }  // values per channel
};

DType acc_dtype(DType dt) { return dt == kFloat64 ? kFloat64 : kFloat32; }

Tensor load(const Tensor& t, DType acc) { return t.detach().to(acc).contiguous(); }

// Values of an optional [C] tensor as doubles; `fill` when undefined.
std::vector<double> channel_values(const Tensor& t, int64_t c, double fill) {
  if (!t.defined()) return std::vector<double>(c, fill);
  return t.detach().to_vector<double>();
}

void check_channel_tensor(const Tensor& t, const char* what, const Tensor& input) {
  if (!t.defined()) return;
  MANTISSA_CHECK(t.dim() == 1 && t.size(0) == input.size(1), "batch_norm",
                 "{} must have shape [{}] for input {}, got {}", what, input.size(1),
                 shape_str(input.shape()), shape_str(t.shape()));
  MANTISSA_CHECK(t.is_floating_point() && !t.dtype().is_float8(), "batch_norm",
                 "{} must be float64, float32, float16 or bfloat16, got {}", what,
                 t.dtype().name());
}

template <typename F>
void for_each_channel(const BnDims& d, F&& f) {
#pragma omp parallel for schedule(static) if (d.n * d.c * d.s > (1 << 15) && d.c > 1)
  for (int64_t c = 0; c < d.c; ++c) f(c);
}

// Batch mean and biased variance per channel (two passes, double accumulation).
template <typename A>
void batch_stats(const BnDims& d, const A* x, std::vector<double>& mean, std::vector<double>& var) {
  for_each_channel(d, [&](int64_t c) {
    double s = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const A* p = x + (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) s += static_cast<double>(p[i]);
    }
    const double mu = s / static_cast<double>(d.m());
    double q = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const A* p = x + (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double dv = static_cast<double>(p[i]) - mu;
        q += dv * dv;
      }
    }
    mean[c] = mu;
    var[c] = q / static_cast<double>(d.m());
  });
}

// y = x * scale[c] + shift[c].
template <typename A>
void normalize(const BnDims& d, const A* x, const std::vector<double>& scale,
               const std::vector<double>& shift, A* y) {
  for_each_channel(d, [&](int64_t c) {
    const A sc = static_cast<A>(scale[c]), sh = static_cast<A>(shift[c]);
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t o = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) y[o + i] = x[o + i] * sc + sh;
    }
  });
}

// What backward needs: the statistics used in forward and the affine weight.
struct Saved {
  BnDims d;
  bool training;
  DType input_dtype;
  std::vector<double> mean, invstd, weight;
};

// Gradients in A: gx (when want_x) and the per-channel sums gb = sum g, gw = sum g xhat.
template <typename A>
void backward_loops(const Saved& sv, const A* x, const A* g, A* gx, std::vector<double>& sum_g,
                    std::vector<double>& sum_gxhat) {
  const BnDims& d = sv.d;
  const double m = static_cast<double>(d.m());
  for_each_channel(d, [&](int64_t c) {
    const double mu = sv.mean[c], is = sv.invstd[c];
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t o = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double gv = static_cast<double>(g[o + i]);
        sg += gv;
        sgx += gv * (static_cast<double>(x[o + i]) - mu) * is;
      }
    }
    sum_g[c] = sg;
    sum_gxhat[c] = sgx;
    if (gx == nullptr) return;
    const double k = sv.weight[c] * is;
    if (!sv.training) {
      // The running statistics are constants: y is affine in x.
      for (int64_t n = 0; n < d.n; ++n) {
        const int64_t o = (n * d.c + c) * d.s;
        for (int64_t i = 0; i < d.s; ++i)
          gx[o + i] = static_cast<A>(k * static_cast<double>(g[o + i]));
      }
      return;
    }
    // dx = w invstd (g - mean(g) - xhat mean(g xhat)): mean and variance depend on x too.
    const double mg = sg / m, mgx = sgx / m;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t o = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double xhat = (static_cast<double>(x[o + i]) - mu) * is;
        gx[o + i] = static_cast<A>(k * (static_cast<double>(g[o + i]) - mg - xhat * mgx));
      }
    }
  });
}

template <typename F>
void dispatch_acc(DType acc, F&& f) {
  if (acc == kFloat64) {
    f(double{});
  } else {
    f(float{});
  }
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  MANTISSA_AUTOCAST("batch_norm", batch_norm, input, running_mean, running_var, weight, bias,
                    training, momentum, eps);
  MANTISSA_CHECK(input.dim() >= 2, "batch_norm", "expected an input [N, C, *], got shape {}",
                 shape_str(input.shape()));
  MANTISSA_CHECK(input.is_floating_point() && !input.dtype().is_float8(), "batch_norm",
                 "expected a float64, float32, float16 or bfloat16 input, got {}",
                 input.dtype().name());
  check_channel_tensor(running_mean, "running_mean", input);
  check_channel_tensor(running_var, "running_var", input);
  check_channel_tensor(weight, "weight", input);
  check_channel_tensor(bias, "bias", input);
  MANTISSA_CHECK(running_mean.defined() == running_var.defined(), "batch_norm",
                 "running_mean and running_var must both be given or both be omitted");
  MANTISSA_CHECK(training || running_mean.defined(), "batch_norm",
                 "eval mode (training=false) needs running_mean and running_var");
  MANTISSA_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, "batch_norm",
                 "eps must be positive and momentum in [0, 1], got eps={} momentum={}", eps,
                 momentum);
  const BnDims d{input.size(0), input.size(1),
                 input.numel() / std::max<int64_t>(1, input.size(0) * input.size(1))};
  MANTISSA_CHECK(!training || d.m() > 1, "batch_norm",
                 "training needs more than one value per channel, got input {}",
                 shape_str(input.shape()));

  const DType dt = input.dtype(), acc = acc_dtype(dt);
  const Tensor x = load(input, acc);
  Saved sv{d,
           training,
           dt,
           std::vector<double>(d.c),
           std::vector<double>(d.c),
           channel_values(weight, d.c, 1.0)};
  std::vector<double> var(d.c);
  if (training) {
    dispatch_acc(acc, [&](auto tag) {
      using A = decltype(tag);
      batch_stats<A>(d, x.data<A>(), sv.mean, var);
    });
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      std::vector<double> rm = channel_values(running_mean, d.c, 0);
      std::vector<double> rv = channel_values(running_var, d.c, 0);
      const double unbias = static_cast<double>(d.m()) / static_cast<double>(d.m() - 1);
      for (int64_t c = 0; c < d.c; ++c) {
        rm[c] = (1 - momentum) * rm[c] + momentum * sv.mean[c];
        rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * unbias;
      }
      // copy_ rounds once into the buffers' own dtype (fp32 in BatchNorm2d).
      running_mean.detach().copy_(tensor_of(rm, {d.c}, kFloat64));
      running_var.detach().copy_(tensor_of(rv, {d.c}, kFloat64));
    }
  } else {
    sv.mean = channel_values(running_mean, d.c, 0);
    var = channel_values(running_var, d.c, 1);
  }
  const std::vector<double> shift_b = channel_values(bias, d.c, 0.0);
  std::vector<double> scale(d.c), shift(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    sv.invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    scale[c] = sv.weight[c] * sv.invstd[c];
    shift[c] = shift_b[c] - sv.mean[c] * scale[c];
  }
  Tensor y = empty(input.shape(), acc);
  dispatch_acc(acc, [&](auto tag) {
    using A = decltype(tag);
    normalize<A>(d, x.data<A>(), scale, shift, y.data<A>());
  });
  Tensor out = y.to(dt);
  if (!autograd::needs_grad(input, weight, bias)) return out;
  const bool need_x = autograd::needs_grad(input);
  const bool need_w = weight.defined() && autograd::needs_grad(weight);
  const bool need_b = bias.defined() && autograd::needs_grad(bias);
  const DType wdt = weight.defined() ? weight.dtype() : dt;
  const DType bdt = bias.defined() ? bias.dtype() : dt;
  // The input is saved in its own dtype (a bf16 batch stays bf16) and widened again in backward.
  return autograd::record(out, {input, weight, bias}, "NativeBatchNormBackward",
                          [sv = std::move(sv), xs = input.detach(), need_x, need_w, need_b, wdt,
                           bdt, acc](const Tensor& grad) {
                            const Tensor xa = load(xs, acc);
                            const Tensor g = load(grad, acc);
                            Tensor gx = need_x ? empty(xs.shape(), acc) : Tensor();
                            std::vector<double> sum_g(sv.d.c), sum_gxhat(sv.d.c);
                            dispatch_acc(acc, [&](auto tag) {
                              using A = decltype(tag);
                              backward_loops<A>(sv, xa.data<A>(), g.data<A>(),
                                                need_x ? gx.data<A>() : nullptr, sum_g, sum_gxhat);
                            });
                            std::vector<Tensor> grads(3);
                            if (need_x) grads[0] = gx.to(sv.input_dtype);
                            if (need_w) grads[1] = tensor_of(sum_gxhat, {sv.d.c}, wdt);
                            if (need_b) grads[2] = tensor_of(sum_g, {sv.d.c}, bdt);
                            return grads;
                          });
}

}  // namespace mantissa
