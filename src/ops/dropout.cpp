// Dropout: a keep-mask drawn from the Generator (one uniform per element, in row-major order,
// serially so a seed gives the same mask for any thread count), survivors scaled by 1/(1-p).
#include "mantissa/ops/dropout.h"
#include "mantissa/core/op_profiler.h"

#include <cmath>
#include <memory>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

// out[i] = x[i] * (mask[i] ? scale : 0), computed in the arithmetic type, rounded once.
template <typename T>
void apply_mask(const T* x, const uint8_t* mask, kernels::acc_t<T> scale, T* out, int64_t n) {
  using A = kernels::acc_t<T>;
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    out[i] = kernels::store<T>(mask[i] ? kernels::load(x[i]) * scale : A(0));
}

}  // namespace

Tensor dropout(const Tensor& a, double p, bool training, Generator* gen) {
  MANTISSA_PROFILE_OP("dropout");
  MANTISSA_AUTOCAST("dropout", dropout, a, p, training, gen);
  constexpr const char* kName = "dropout";
  MANTISSA_CHECK(p >= 0.0 && p <= 1.0, kName, "probability has to be between 0 and 1, but got {}",
                 p);
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), kName,
                 "expected a floating input (float64, float32, float16, bfloat16), got {}",
                 a.dtype().name());
  if (!training || p == 0.0) return a;

  const int64_t n = a.numel();
  Generator& g = gen ? *gen : default_generator();
  if (a.is_cuda()) {
    // One draw from the Generator seeds the whole mask (GPU masks differ from the CPU's).
    const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
    const Tensor mask = kernels::gpu_kernels().dropout_mask(a, g.next_u64(), p);
    Tensor out = kernels::gpu_kernels().dropout_apply_mask(a, mask, scale);
    return autograd::record(out, {a}, "DropoutBackward", [mask, scale](const Tensor& grad) {
      return std::vector<Tensor>{kernels::gpu_kernels().dropout_apply_mask(grad, mask, scale)};
    });
  }
  // Keep with probability 1 - p: u in [0, 1) survives when u >= p. p == 1 keeps nothing, and
  // the scale is 0 rather than inf (PyTorch), so the output and gradient are exact zeros.
  auto mask = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) (*mask)[i] = g.uniform() >= p ? 1 : 0;
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);

  Tensor x = a.detach().contiguous();
  Tensor out = empty(a.shape(), a.dtype());
  kernels::dispatch_floating(a.dtype(), kName, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    apply_mask<T>(x.data<T>(), mask->data(), static_cast<A>(scale), out.data<T>(), n);
  });
  return autograd::record(out, {a}, "DropoutBackward", [mask, scale, n](const Tensor& grad) {
    Tensor gc = grad.contiguous();
    Tensor dx = empty(gc.shape(), gc.dtype());
    kernels::dispatch_floating(gc.dtype(), kName, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = kernels::acc_t<T>;
      apply_mask<T>(gc.data<T>(), mask->data(), static_cast<A>(scale), dx.data<T>(), n);
    });
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mantissa
