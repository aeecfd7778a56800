#pragma once
// The one run-time dispatch mechanism of the CPU kernels. A kernel family compiles each SIMD
// level's code per function (target attributes) and, per call or once, picks the table of the
// level SimdLevelSelector::active() answers. Families with a test hook keep one selector, so a
// test can force a lower level and compare it with the widest bit for bit.
#include <atomic>
#include <optional>

#include "mantissa/core/cpu_features.h"

namespace mantissa {

class SimdLevelSelector {
 public:
  // The level to run now: simd_level() unless a test forced a lower one.
  SimdLevel active() const {
    const int forced = forced_.load(std::memory_order_relaxed);
    return forced >= 0 ? static_cast<SimdLevel>(forced) : simd_level();
  }
  // Test hook: run `level` (nullopt: back to simd_level()). Returns false, changing nothing,
  // when this CPU (after MANTISSA_DISABLE_SIMD) lacks it. Not thread-safe against kernels
  // running meanwhile.
  bool force(std::optional<SimdLevel> level) {
    if (level && *level > simd_level()) return false;
    forced_.store(level ? static_cast<int>(*level) : -1, std::memory_order_relaxed);
    return true;
  }

 private:
  std::atomic<int> forced_{-1};
};

}  // namespace mantissa
