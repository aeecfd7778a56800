// AVX2 level of the batch-norm row loops: batch_norm_impl.h built with AVX2 enabled by pragma
// (after every standard header). Without it an AVX2 CPU ran the SSE2 baseline, where the bf16
// loads and the rounding stores have no pmovzx/packusdw and cost three times the f32 loop
// (the CNN's bf16 BatchNorm2d was 12% of a bf16-true step on Zen 3). FMA is left off so that
// no multiply-add is contracted: results stay bit-identical to the baseline level.
// The 64-byte vectors never cross a non-inline call (see batch_norm_kernels.cpp).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <immintrin.h>
#include <cstdint>
#include <cstring>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/norm/batch_norm_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace mantissa::kernels::cpu {
namespace {
#define MANTISSA_BN_F16C 1
#include "kernels/cpu/norm/batch_norm_impl.h"
}  // namespace

const BnKernels kBnAvx2 = kTable;

}  // namespace mantissa::kernels::cpu

#pragma GCC pop_options
