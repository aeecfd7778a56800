#pragma once
// Packing fp32 GEMM operands as bf16 terms, for the float32 matmul precisions "medium" (one
// bf16 product) and "high" (bf16x3) (mantissa/ops/matmul_precision.h). x_hi = bf16(x) and
// x_lo = bf16(x - x_hi), both rounded to nearest even; a product of two bf16 values is exact in
// fp32, so a GEMM over the packed operands with fp32 accumulation computes
//   medium:  sum_k a_hi*b_hi
//   high:    sum_k a_hi*b_hi + a_hi*b_lo + a_lo*b_hi   (inner dimension 3K: A = [hi|hi|lo],
//            B = [hi; lo; hi])
// with exactly the roundings a bf16 GEMM makes. The output is either bf16 (for a native bf16
// GEMM with fp32 output) or fp32 holding bf16 values (for the fp32 GEMM, where no bf16 one
// exists: the same numbers, no speed-up).
#include <cstdint>

namespace mantissa::kernels {

// a: `rows` contiguous rows of k floats. out: rows of terms*k (terms 1: [hi]; 3: [hi, hi, lo]).
void pack_bf16_terms_a(const float* a, int64_t rows, int64_t k, int terms, float* out);
void pack_bf16_terms_a(const float* a, int64_t rows, int64_t k, int terms, uint16_t* out);
// b: `batch` contiguous k x n matrices. out: batch matrices of (terms*k) x n (terms 1: [hi];
// 3: [hi; lo; hi]).
void pack_bf16_terms_b(const float* b, int64_t batch, int64_t k, int64_t n, int terms, float* out);
void pack_bf16_terms_b(const float* b, int64_t batch, int64_t k, int64_t n, int terms,
                       uint16_t* out);

}  // namespace mantissa::kernels
