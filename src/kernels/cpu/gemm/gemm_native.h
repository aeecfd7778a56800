#pragma once
// mantissa's own AVX-512 GEMM for f32 and bf16 (fp32 accumulation), BLIS-style: operands are
// packed into register-blocked panels, a 14x32 micro-kernel keeps its C tile in registers
// across a whole K block. Any strides (transposed or not contiguous operands are read in
// place), leading batch, and a bias fused into the epilogue. Each output element is summed in
// one fixed k order by one thread, so results do not depend on the thread count.
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// One operand of a batched product: element (r, c) of batch entry i is
// data[offsets[i] + r * row_stride + c * col_stride] (in elements). Broadcast batch entries
// simply repeat an offset.
struct GemmMatrix {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  const int64_t* offsets = nullptr;
};

struct GemmArgs {
  DType dtype = kFloat32;      // a, b and bias: f32 or bf16
  DType out_dtype = kFloat32;  // c: f32, or bf16 (rounded once, RNE) when dtype is bf16
  int64_t batch = 1, M = 0, N = 0, K = 0;
  GemmMatrix a;                // batch x (M x K)
  GemmMatrix b;                // batch x (K x N)
  const void* bias = nullptr;  // N elements of `dtype` added to every row, or null
  void* c = nullptr;           // contiguous batch x M x N of out_dtype
};

// Whether this CPU (after MANTISSA_DISABLE_SIMD) runs the native kernel for `dtype`:
// f32 needs AVX-512F, bf16 needs AVX-512 BF16.
bool gemm_native_supported(DType dtype);

// c = a @ b (+ bias) for every batch entry. Requires gemm_native_supported(args.dtype),
// M, N, K >= 1. OpenMP over output tiles.
void gemm_native(const GemmArgs& args);

}  // namespace mantissa::kernels
