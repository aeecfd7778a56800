// AVX-512 level of the batch-norm row loops: batch_norm_impl.h built with the ISA enabled by
// pragma (after every standard header, so no inline library code is built for it);
// batch_norm_kernels.cpp picks it only when cpu_features() says so.
#include <immintrin.h>
#include <cstdint>
#include <cstring>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/norm/batch_norm_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,f16c")

namespace mantissa::kernels::cpu {
namespace {
#define MANTISSA_BN_F16C 1
#include "kernels/cpu/norm/batch_norm_impl.h"
}  // namespace

const BnKernels kBnAvx512 = kTable;

}  // namespace mantissa::kernels::cpu

#pragma GCC pop_options
