#include "mantissa/core/generator.h"

#include <cmath>
#include <sstream>

#include "mantissa/core/convert.h"

namespace mantissa {

double Generator::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_normal_ = r * std::sin(2.0 * M_PI * u2);
  has_spare_normal_ = true;
  return r * std::cos(2.0 * M_PI * u2);
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling: no modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

std::string Generator::state() const {
  std::ostringstream os;
  os << seed_ << ' ' << engine_ << ' ' << has_spare_normal_ << ' ';
  os.precision(17);
  os << std::hexfloat << spare_normal_;
  return os.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream is(state);
  std::string spare;
  is >> seed_ >> engine_ >> has_spare_normal_ >> spare;
  MANTISSA_CHECK(!is.fail(), "Generator", "corrupt generator state string");
  spare_normal_ = std::strtod(spare.c_str(), nullptr);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
template <typename Fn>
Tensor generate(const Shape& shape, DType dtype, Fn&& draw) {
  for (int64_t s : shape)  // before the draws' buffer is sized from it
    MANTISSA_CHECK(s >= 0, "random tensor", "negative dimension in shape {}", shape_str(shape));
  const int64_t n = numel_of(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = draw();
  return tensor_of(v, shape, dtype);
}
Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }
}  // namespace

Tensor rand(const Shape& shape, DType dtype, Generator* gen) {
  return uniform(shape, 0.0, 1.0, dtype, gen);
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator* gen) {
  MANTISSA_CHECK(dtype.is_floating_point(), "uniform", "needs a floating dtype, got {}",
                 dtype.name());
  MANTISSA_CHECK(low <= high, "uniform", "low {} must not exceed high {}", low, high);
  Generator& g = pick(gen);
  return generate(shape, dtype, [&] { return low + (high - low) * g.uniform(); });
}

Tensor randn(const Shape& shape, DType dtype, Generator* gen) {
  MANTISSA_CHECK(dtype.is_floating_point(), "randn", "needs a floating dtype, got {}",
                 dtype.name());
  Generator& g = pick(gen);
  return generate(shape, dtype, [&] { return g.normal(); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* gen) {
  MANTISSA_CHECK(low < high, "randint", "low {} must be below high {}", low, high);
  Generator& g = pick(gen);
  const auto span = static_cast<uint64_t>(high - low);
  return generate(shape, dtype,
                  [&] { return static_cast<double>(low + static_cast<int64_t>(g.below(span))); });
}

Tensor randperm(int64_t n, Generator* gen) {
  Generator& g = pick(gen);
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.below(static_cast<uint64_t>(i + 1))]);
  return tensor(p, {n});
}

}  // namespace mantissa
