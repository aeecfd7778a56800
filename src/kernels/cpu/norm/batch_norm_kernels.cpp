// Baseline level of the batch-norm row loops and the run-time choice of level.
// The 64-byte vectors never cross a non-inline call, so GCC's note that passing them changes
// the ABI without AVX-512 does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/norm/batch_norm_kernels.h"

#include <cstring>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {
namespace {
#define MANTISSA_BN_F16C 0
#include "kernels/cpu/norm/batch_norm_impl.h"
}  // namespace

const BnKernels kBnBaseline = kTable;

const BnKernels& bn_kernels() {
  static const BnKernels& k = []() -> const BnKernels& {
    const SimdLevel level = simd_level();
    if (level >= SimdLevel::kAvx512) return kBnAvx512;
    return level == SimdLevel::kAvx2 ? kBnAvx2 : kBnBaseline;
  }();
  return k;
}

}  // namespace mantissa::kernels::cpu
