#include "mantissa/nn/init.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::nn::init {
namespace {

thread_local bool skip_random_init = false;

void check_floating(const Tensor& t, const char* where) {
  MANTISSA_CHECK(t.defined() && t.is_floating_point(), where, "expects a floating tensor, got {}",
                 t.defined() ? std::string(t.dtype().name()) : std::string("an undefined one"));
}

// Copies f64 values into t (one rounding to t's dtype), outside the graph.
Tensor fill_from(Tensor t, const Tensor& values) {
  NoGradGuard no_grad;
  mantissa::detail::copy_unchecked(t, values);
  return t;
}

// Fills t with the values draw(n) returns for consecutive runs of its elements (row-major), a
// chunk of at most kInitChunk at a time: the draws are sequential, so the values equal one
// draw of the whole tensor, while the temporaries stay chunk-sized (a large layer must not
// cost three times its size on the way). A non-contiguous t is drawn whole.
constexpr int64_t kInitChunk = int64_t{1} << 16;
Tensor fill_in_chunks(Tensor t, const std::function<Tensor(int64_t)>& draw) {
  NoGradGuard no_grad;
  const int64_t n = t.numel();
  if (!t.is_contiguous()) return fill_from(t, draw(n).reshape(t.shape()));
  Tensor flat = t.view({n});
  for (int64_t start = 0; start < n; start += kInitChunk) {
    const int64_t m = std::min(kInitChunk, n - start);
    fill_from(flat.narrow(0, start, m), draw(m));
  }
  return t;
}

// The fan the kaiming initializers scale by, after checking t can be initialized with it.
double kaiming_fan(const Tensor& t, FanMode mode, const char* where) {
  check_floating(t, where);
  const Fans f = calculate_fan_in_and_fan_out(t);
  const double fan = static_cast<double>(mode == FanMode::kFanIn ? f.fan_in : f.fan_out);
  MANTISSA_CHECK(fan > 0, where, "tensor of shape {} has a zero fan", shape_str(t.shape()));
  return fan;
}

}  // namespace

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  MANTISSA_CHECK(t.dim() >= 2, "init",
                 "fan in and fan out cannot be computed for a tensor with fewer than 2 "
                 "dimensions (shape {})",
                 shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(std::string_view nl, double param) {
  if (nl == "linear" || nl == "identity" || nl == "sigmoid" || nl == "conv1d" || nl == "conv2d" ||
      nl == "conv3d" || nl == "conv_transpose1d" || nl == "conv_transpose2d" ||
      nl == "conv_transpose3d")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 0.75;
  fail("init",
       "unsupported nonlinearity \"{}\" (valid: linear, identity, sigmoid, conv1d, "
       "conv2d, conv3d, conv_transpose1d/2d/3d, tanh, relu, leaky_relu, selu)",
       nl);
}

SkipRandomInit::SkipRandomInit() : previous_(skip_random_init) { skip_random_init = true; }
SkipRandomInit::~SkipRandomInit() { skip_random_init = previous_; }
bool random_init_skipped() { return skip_random_init; }

Tensor uniform_(Tensor t, double a, double b, Generator* gen) {
  check_floating(t, "init::uniform_");
  if (skip_random_init) return t;
  // Drawn in double and rounded once into t's dtype by the generator: the same values as a
  // float64 draw followed by a cast, without a float64 temporary, a chunk at a time.
  return fill_in_chunks(t, [&](int64_t n) { return uniform({n}, a, b, t.dtype(), gen); });
}

Tensor normal_(Tensor t, double mean, double std, Generator* gen) {
  check_floating(t, "init::normal_");
  MANTISSA_CHECK(std >= 0, "init::normal_", "std must be non-negative, got {}", std);
  if (skip_random_init) return t;
  return fill_in_chunks(t, [&](int64_t n) {
    Tensor v = randn({n}, kFloat64, gen);
    double* p = v.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = mean + std * p[i];
    return v;
  });
}

Tensor constant_(Tensor t, double value) {
  check_floating(t, "init::constant_");
  NoGradGuard no_grad;
  mantissa::detail::fill_unchecked(t, value);
  return t;
}

Tensor zeros_(Tensor t) { return constant_(t, 0.0); }
Tensor ones_(Tensor t) { return constant_(t, 1.0); }

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, std::string_view nonlinearity,
                        Generator* gen) {
  const double fan = kaiming_fan(t, mode, "init::kaiming_uniform_");
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
  return uniform_(t, -bound, bound, gen);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, std::string_view nonlinearity,
                       Generator* gen) {
  const double fan = kaiming_fan(t, mode, "init::kaiming_normal_");
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan), gen);
}

Tensor xavier_uniform_(Tensor t, double gain, Generator* gen) {
  check_floating(t, "init::xavier_uniform_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(f.fan_in + f.fan_out));
  return uniform_(t, -bound, bound, gen);
}

Tensor xavier_normal_(Tensor t, double gain, Generator* gen) {
  check_floating(t, "init::xavier_normal_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out)), gen);
}

}  // namespace mantissa::nn::init
