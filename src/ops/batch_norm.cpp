// batch_norm: per-channel statistics, the running-statistics update and the full backward.
// Loops run over the [N, C, S] view of the input, always in memory order: per-channel sums over
// fixed chunks of the batch (added in chunk order), outputs row by row; every partition is
// fixed, so results do not depend on the thread count. f32, bf16 and f16 are read and written
// in their own dtype by the 16-lane row kernels of kernels/cpu/norm/batch_norm_kernels.h (fp32
// math, a row's sums in fp32, rows added up in double; no separate widening or rounding pass),
// and f64 runs the scalar double loops (per channel).
#include "mantissa/ops/batch_norm.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "core/inplace.h"  // the running statistics are written with copy_unchecked on every build
#include "kernels/cpu/norm/batch_norm_kernels.h"
#include "kernels/device_check.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

struct BnDims {
  int64_t n, c, s;                     // input viewed as [n, c, s]
  int64_t m() const { return n * s; }  // values per channel
};

Tensor load(const Tensor& t, DType dt) { return t.detach().to(dt).contiguous(); }

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

// f(offset, c) for each row of S values, in memory order: passes that write a fresh output go
// row after row, so the hardware prefetchers see long streams (channel order jumps N times).
template <typename F>
void for_each_row(const BnDims& d, F&& f) {
  const int64_t rows = d.n * d.c;
#pragma omp parallel for schedule(static) if (rows * d.s > (1 << 15) && rows > 1)
  for (int64_t r = 0; r < rows; ++r) f(r * d.s, r % d.c);
}

// Per-channel totals of two row sums, row(offset, c, &a, &b), over fixed chunks of the batch,
// each read in memory order (channel order would jump between short rows of data that is not in
// cache), then added up in chunk order: the result does not depend on the thread count.
template <typename F>
void channel_sums(const BnDims& d, std::vector<double>& total_a, std::vector<double>& total_b,
                  F&& row) {
  const int64_t chunks = std::min<int64_t>(d.n, 16);
  std::vector<double> part_a(chunks * d.c, 0.0), part_b(chunks * d.c, 0.0);
#pragma omp parallel for schedule(static) if (d.n * d.c * d.s > (1 << 15) && chunks > 1)
  for (int64_t q = 0; q < chunks; ++q) {
    for (int64_t n = d.n * q / chunks; n < d.n * (q + 1) / chunks; ++n)
      for (int64_t c = 0; c < d.c; ++c) {
        float ra = 0, rb = 0;
        row((n * d.c + c) * d.s, c, &ra, &rb);
        part_a[q * d.c + c] += ra;
        part_b[q * d.c + c] += rb;
      }
  }
  total_a.assign(d.c, 0.0);
  total_b.assign(d.c, 0.0);
  for (int64_t q = 0; q < chunks; ++q)
    for (int64_t c = 0; c < d.c; ++c) {
      total_a[c] += part_a[q * d.c + c];
      total_b[c] += part_b[q * d.c + c];
    }
}

// ---- f64: scalar loops in double ----

// Batch mean and biased variance of channel c (two passes).
void channel_stats(const BnDims& d, const double* x, int64_t c, double* mean, double* var) {
  double s = 0;
  for (int64_t n = 0; n < d.n; ++n) {
    const double* p = x + (n * d.c + c) * d.s;
    for (int64_t i = 0; i < d.s; ++i) s += p[i];
  }
  const double mu = s / static_cast<double>(d.m());
  double q = 0;
  for (int64_t n = 0; n < d.n; ++n) {
    const double* p = x + (n * d.c + c) * d.s;
    for (int64_t i = 0; i < d.s; ++i) {
      const double dv = p[i] - mu;
      q += dv * dv;
    }
  }
  *mean = mu;
  *var = q / static_cast<double>(d.m());
}

void batch_stats(const BnDims& d, const double* x, std::vector<double>& mean,
                 std::vector<double>& var) {
  for_each_channel(d, [&](int64_t c) { channel_stats(d, x, c, &mean[c], &var[c]); });
}

// One row of y = x * scale + shift.
void affine_row(const double* x, double* y, int64_t n, double scale, double shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

// What backward needs: the statistics used in forward and the affine weight.
struct Saved {
  BnDims d;
  bool training;
  std::vector<double> mean, invstd, weight;
};

// Gradients: gx (when wanted) and the per-channel sums gb = sum g, gw = sum g xhat.
void backward_loops(const Saved& sv, const double* x, const double* g, double* gx,
                    std::vector<double>& sum_g, std::vector<double>& sum_gxhat) {
  const BnDims& d = sv.d;
  const double m = static_cast<double>(d.m());
  for_each_channel(d, [&](int64_t c) {
    const double mu = sv.mean[c], is = sv.invstd[c];
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t o = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        sg += g[o + i];
        sgx += g[o + i] * (x[o + i] - mu) * is;
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
        for (int64_t i = 0; i < d.s; ++i) gx[o + i] = k * g[o + i];
      }
      return;
    }
    // dx = w invstd (g - mean(g) - xhat mean(g xhat)): mean and variance depend on x too.
    const double mg = sg / m, mgx = sgx / m;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t o = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double xhat = (x[o + i] - mu) * is;
        gx[o + i] = k * (g[o + i] - mg - xhat * mgx);
      }
    }
  });
}

// ---- f32, bf16, f16: the row kernels ----

template <typename T>
const kernels::cpu::BnRowKernels<T>& row_kernels() {
  if constexpr (std::is_same_v<T, float>) {
    return kernels::cpu::bn_kernels().f32;
  } else if constexpr (std::is_same_v<T, Half>) {
    return kernels::cpu::bn_kernels().f16;
  } else {
    return kernels::cpu::bn_kernels().bf16;
  }
}

// Batch mean and biased variance per channel: sums, then squared deviations from the mean.
template <typename T>
void batch_stats(const BnDims& d, const T* x, std::vector<double>& mean, std::vector<double>& var) {
  const auto& k = row_kernels<T>();
  std::vector<double> sum, unused;
  channel_sums(d, sum, unused,
               [&](int64_t o, int64_t, float* a, float*) { *a = k.sum(x + o, d.s); });
  const double m = static_cast<double>(d.m());
  std::vector<float> muf(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    mean[c] = sum[c] / m;
    muf[c] = static_cast<float>(mean[c]);
  }
  std::vector<double> sq;
  channel_sums(d, sq, unused,
               [&](int64_t o, int64_t c, float* a, float*) { *a = k.sq_dev(x + o, d.s, muf[c]); });
  // Deviations were taken from the rounded mean: sum (x - muf)^2 = sum (x - mu)^2 +
  // m (mu - muf)^2, since the deviations from mu sum to zero.
  for (int64_t c = 0; c < d.c; ++c) {
    const double e = mean[c] - muf[c];
    var[c] = std::max(0.0, sq[c] / m - e * e);
  }
}

template <typename T>
void affine_row(const T* x, T* y, int64_t n, double scale, double shift) {
  row_kernels<T>().affine(x, y, n, static_cast<float>(scale), static_cast<float>(shift));
}

template <typename T>
void backward_loops(const Saved& sv, const T* x, const T* g, T* gx, std::vector<double>& sum_g,
                    std::vector<double>& sum_gxhat) {
  const auto& k = row_kernels<T>();
  const BnDims& d = sv.d;
  const double m = static_cast<double>(d.m());
  // gx = a g + b (x - muf) + c0 per channel (training); a g in eval mode.
  std::vector<float> a(d.c), b(d.c), c0(d.c), muf(d.c);
  for (int64_t c = 0; c < d.c; ++c) muf[c] = static_cast<float>(sv.mean[c]);
  std::vector<double> sum_gd;  // sum g (x - muf)
  channel_sums(d, sum_g, sum_gd, [&](int64_t o, int64_t c, float* rg, float* rgd) {
    k.grad_sums(g + o, x + o, d.s, muf[c], rg, rgd);
  });
  for (int64_t c = 0; c < d.c; ++c) {
    const double mu = sv.mean[c], is = sv.invstd[c], sg = sum_g[c];
    // sum g (x - mu) = sum g (x - muf) + (muf - mu) sum g.
    const double sgx = (sum_gd[c] + (muf[c] - mu) * sg) * is;
    sum_gxhat[c] = sgx;
    const double kc = sv.weight[c] * is;
    // dx = k (g - mean(g) - xhat mean(g xhat)), xhat = (x - muf) is + (muf - mu) is.
    const double bc = -kc * is * (sgx / m);
    a[c] = static_cast<float>(kc);
    b[c] = static_cast<float>(bc);
    c0[c] = static_cast<float>(-kc * (sg / m) + bc * (muf[c] - mu));
  }
  if (gx == nullptr) return;
  for_each_row(d, [&](int64_t o, int64_t c) {
    if (sv.training) {
      k.grad_input(g + o, x + o, gx + o, d.s, a[c], b[c], c0[c], muf[c]);
    } else {
      // The running statistics are constants: y is affine in x.
      k.affine(g + o, gx + o, d.s, a[c], 0.0f);
    }
  });
}

// ---- both ----

// The forward: in training the batch statistics (sv.mean, var) per channel, then
// y = (x - mean) invstd w + b row by row in memory order.
template <typename T>
void forward_loops(const BnDims& d, const T* x, T* y, bool training, double eps,
                   const std::vector<double>& bias, Saved& sv, std::vector<double>& var) {
  if (training) batch_stats(d, x, sv.mean, var);
  std::vector<double> scale(d.c), shift(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    sv.invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    scale[c] = sv.weight[c] * sv.invstd[c];
    shift[c] = bias[c] - sv.mean[c] * scale[c];
  }
  for_each_row(d, [&](int64_t o, int64_t c) { affine_row(x + o, y + o, d.s, scale[c], shift[c]); });
}

// Runs f(TypeTag<T>) with T = double, float, uint16_t (bf16 bits) or Half for the dtype.
template <typename F>
void dispatch_loop(DType dt, F&& f) {
  if (dt == kFloat64) {
    f(kernels::TypeTag<double>{});
  } else if (dt == kFloat32) {
    f(kernels::TypeTag<float>{});
  } else if (dt == kFloat16) {
    f(kernels::TypeTag<Half>{});
  } else {
    f(kernels::TypeTag<uint16_t>{});
  }
}

template <typename T>
T* raw(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  MANTISSA_PROFILE_OP("batch_norm");
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

  if (kernels::gpu::any_cuda({&input, &running_mean, &running_var, &weight, &bias})) {
    kernels::gpu::BatchNormForward f = kernels::gpu_kernels().batch_norm_forward(
        input, running_mean, running_var, weight, bias, training, momentum, eps, d.n, d.c, d.s);
    if (!autograd::needs_grad(input, weight, bias)) return f.y;
    const bool need_x = autograd::needs_grad(input);
    const bool need_w = weight.defined() && autograd::needs_grad(weight);
    const bool need_b = bias.defined() && autograd::needs_grad(bias);
    const DType wdt = weight.defined() ? weight.dtype() : input.dtype();
    const DType bdt = bias.defined() ? bias.dtype() : input.dtype();
    return autograd::record(f.y, {input, weight, bias}, {input}, "NativeBatchNormBackward",
                            [sv = f.saved, xs = input.detach(), d, training, need_x, need_w, need_b,
                             wdt, bdt](const Tensor& grad) {
                              kernels::gpu::BatchNormGrads r =
                                  kernels::gpu_kernels().batch_norm_backward(grad, xs, sv, training,
                                                                             need_x, d.n, d.c, d.s);
                              std::vector<Tensor> grads(3);
                              if (need_x) grads[0] = r.dx;
                              if (need_w) grads[1] = r.sum_gxhat.to(wdt);
                              if (need_b) grads[2] = r.sum_g.to(bdt);
                              return grads;
                            });
  }
  const DType dt = input.dtype();
  const Tensor x = load(input, dt);
  Saved sv{d, training, std::vector<double>(d.c), std::vector<double>(d.c),
           channel_values(weight, d.c, 1.0)};
  std::vector<double> var(d.c);
  if (!training) {
    sv.mean = channel_values(running_mean, d.c, 0);
    var = channel_values(running_var, d.c, 1);
  }
  const std::vector<double> bias_v = channel_values(bias, d.c, 0.0);
  Tensor y = empty(input.shape(), dt);
  dispatch_loop(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_loops(d, raw<T>(x), raw<T>(y), training, eps, bias_v, sv, var);
  });
  if (training && running_mean.defined()) {
    NoGradGuard no_grad;
    std::vector<double> rm = channel_values(running_mean, d.c, 0);
    std::vector<double> rv = channel_values(running_var, d.c, 0);
    const double unbias = static_cast<double>(d.m()) / static_cast<double>(d.m() - 1);
    for (int64_t c = 0; c < d.c; ++c) {
      rm[c] = (1 - momentum) * rm[c] + momentum * sv.mean[c];
      rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * unbias;
    }
    // copy_ rounds once into the buffers' own dtype (fp32 in BatchNorm2d).
    mantissa::detail::copy_unchecked(running_mean.detach(), tensor_of(rm, {d.c}, kFloat64));
    mantissa::detail::copy_unchecked(running_var.detach(), tensor_of(rv, {d.c}, kFloat64));
  }
  const Tensor& out = y;
  if (!autograd::needs_grad(input, weight, bias)) return out;
  const bool need_x = autograd::needs_grad(input);
  const bool need_w = weight.defined() && autograd::needs_grad(weight);
  const bool need_b = bias.defined() && autograd::needs_grad(bias);
  const DType wdt = weight.defined() ? weight.dtype() : dt;
  const DType bdt = bias.defined() ? bias.dtype() : dt;
  // The input is saved in its own dtype (a bf16 batch stays bf16). The weight's values are
  // copied into sv and the running statistics are not read: only the input is version-checked.
  return autograd::record(out, {input, weight, bias}, {input}, "NativeBatchNormBackward",
                          [sv = std::move(sv), xs = input.detach(), need_x, need_w, need_b, wdt,
                           bdt, dt](const Tensor& grad) {
                            const Tensor xa = load(xs, dt);
                            const Tensor g = load(grad, dt);
                            Tensor gx = need_x ? empty(xs.shape(), dt) : Tensor();
                            std::vector<double> sum_g(sv.d.c), sum_gxhat(sv.d.c);
                            dispatch_loop(dt, [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              backward_loops(sv, raw<T>(xa), raw<T>(g),
                                             need_x ? raw<T>(gx) : nullptr, sum_g, sum_gxhat);
                            });
                            std::vector<Tensor> grads(3);
                            if (need_x) grads[0] = gx;
                            if (need_w) grads[1] = tensor_of(sum_gxhat, {sv.d.c}, wdt);
                            if (need_b) grads[2] = tensor_of(sum_g, {sv.d.c}, bdt);
                            return grads;
                          });
}

}  // namespace mantissa
