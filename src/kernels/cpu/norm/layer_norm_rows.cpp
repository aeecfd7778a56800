// Baseline level of the layer-norm row loops and the run-time choice of level.
#include "kernels/cpu/norm/layer_norm_rows.h"

#include <cmath>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {
namespace {
#include "kernels/cpu/norm/layer_norm_rows_impl.h"
}  // namespace

const LnRowKernels kLnBaseline = kTable;

const LnRowKernels& ln_row_kernels() {
  static const LnRowKernels& k = []() -> const LnRowKernels& {
    return simd_level() >= SimdLevel::kAvx2 ? kLnAvx2 : kLnBaseline;
  }();
  return k;
}

}  // namespace mantissa::kernels::cpu
