// AVX2 + FMA level of the layer-norm row loops (the shared loops of layer_norm_rows_impl.h,
// vectorised 8 lanes wide). Compiled for the baseline target with the ISA enabled by pragma
// after the standard headers; ln_row_kernels() picks it only when simd_level() >= kAvx2 (so
// AVX-512 CPUs run it too: rows of a few hundred values gain little from wider vectors).
#include <cmath>
#include <cstdint>

#include "kernels/cpu/norm/layer_norm_rows.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace mantissa::kernels::cpu {
namespace {
#include "kernels/cpu/norm/layer_norm_rows_impl.h"
}  // namespace

const LnRowKernels kLnAvx2 = kTable;

}  // namespace mantissa::kernels::cpu

#pragma GCC pop_options
