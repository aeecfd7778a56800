#pragma once
// Seeded random numbers. The generator is a 64-bit counter-free mt19937_64 with our own
// uniform/normal transforms (std:: distributions differ between standard libraries), so a
// seed gives the same tensors on every platform.
#include <cstdint>
#include <random>

#include "mantissa/core/tensor.h"

namespace mantissa {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    engine_.seed(seed);
    has_spare_normal_ = false;
  }
  uint64_t initial_seed() const { return seed_; }
  uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double normal();  // standard normal (Box-Muller, caches the second value)
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

  // Full state, for checkpoints that resume bit for bit.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  uint64_t seed_ = 0;
  std::mt19937_64 engine_;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0;
};

// The process-wide default generator (torch.manual_seed / torch.default_generator).
Generator& default_generator();
void manual_seed(uint64_t seed);

// Uniform [low, high), normal(mean, std), integers in [low, high).
Tensor rand(const Shape& shape, DType dtype = kDefaultFloat, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, DType dtype = kDefaultFloat,
               Generator* gen = nullptr);
Tensor randn(const Shape& shape, DType dtype = kDefaultFloat, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64,
               Generator* gen = nullptr);
// A random permutation of 0..n-1 (int64), Fisher-Yates.
Tensor randperm(int64_t n, Generator* gen = nullptr);

}  // namespace mantissa
