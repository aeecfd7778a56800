#pragma once
// The SIMD levels a kernel test runs at: the scalar reference, then each level this CPU has
// (as MANTISSA_DISABLE_SIMD leaves it).
#include <vector>

#include "mantissa/core/cpu_features.h"

namespace mantissa::testing {

inline std::vector<SimdLevel> simd_levels_here() {
  std::vector<SimdLevel> out = {SimdLevel::kScalar};
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level() >= l) out.push_back(l);
  return out;
}

}  // namespace mantissa::testing
