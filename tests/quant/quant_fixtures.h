#pragma once
// Loading the bitsandbytes reference files of tests/fixtures/quant and regenerating the
// hash-based inputs scripts/make_quant_fixtures.py describes instead of storing.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "mantissa/core/tensor.h"
#include "mantissa/io/safetensors.h"

namespace mantissa::quant::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(MANTISSA_FIXTURES_DIR) + "/quant/" + name;
}

inline std::map<std::string, Tensor> load_fixture(const std::string& name) {
  std::map<std::string, Tensor> m;
  for (auto& [k, t] : io::load_safetensors(fixture_path(name)).tensors) m[k] = t;
  return m;
}

// hash_floats(n, seed) of the script: float32 values in [0.5, 1.5).
inline std::vector<float> hash_floats(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) * 2654435761ull + seed) % (1ull << 32);
    v[i] = static_cast<float>(h >> 8) * 0x1p-24f + 0.5f;
  }
  return v;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<T> v(static_cast<size_t>(c.numel()));
  std::memcpy(v.data(), c.data_ptr(), c.nbytes());
  return v;
}

inline std::vector<uint32_t> bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint32_t> v(c.nbytes() / 4);
  std::memcpy(v.data(), c.data_ptr(), c.nbytes());
  return v;
}

}  // namespace mantissa::quant::testing
