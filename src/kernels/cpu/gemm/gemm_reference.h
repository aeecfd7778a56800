#pragma once
// Cache-blocked reference GEMM for float64 (oneDNN has no f64 matmul). Accumulates in double
// in a fixed k order per output element, so results do not depend on the thread count.
#include <cstdint>

namespace mantissa::kernels {

// One row-major-or-strided matrix: element (r, c) is data[r * row_stride + c * col_stride].
struct StridedMatrix {
  const double* data;
  int64_t row_stride;
  int64_t col_stride;
};

// For each batch index i: C_i (M x N, contiguous rows, C + i*M*N) = A_i (M x K) @ B_i (K x N),
// where A_i starts at a.data + a_offsets[i] and B_i at b.data + b_offsets[i] (broadcast batch
// dims simply repeat an offset). OpenMP over (batch, row block) tiles.
void gemm_f64_batched(int64_t batch, int64_t M, int64_t N, int64_t K, StridedMatrix a,
                      const int64_t* a_offsets, StridedMatrix b, const int64_t* b_offsets,
                      double* c);

}  // namespace mantissa::kernels
