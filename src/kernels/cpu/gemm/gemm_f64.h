#pragma once
// float64 GEMM (oneDNN has no f64 matmul): C = [C +] A @ B for a batch of strided operands,
// accumulated in double. At SIMD level avx2 and above it runs on a packed, cache-blocked AVX2+FMA
// kernel with a 6x8 tile of doubles (gemm_f64_avx2_impl.h); below, on the blocked reference
// (gemm_reference.h). Each output element is one fixed sequence of multiply-adds over k whichever
// thread computes it, so results do not depend on the thread count; the AVX2 path fuses each
// multiply-add (FMA, one rounding) where the reference rounds twice, so the two paths differ in
// the last bits (a relative 1e-15 per term).
#include <atomic>
#include <cstdint>

#include "kernels/cpu/gemm/gemm_reference.h"

namespace mantissa::kernels {

struct GemmF64Args {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  StridedMatrix a{};                   // batch x (M x K), entry i at a.data + a_offsets[i]
  const int64_t* a_offsets = nullptr;  // null: every entry at offset 0
  StridedMatrix b{};                   // batch x (K x N), entry i at b.data + b_offsets[i]
  const int64_t* b_offsets = nullptr;
  double* c = nullptr;                 // element (r, j) of entry i: c[c_offsets[i] + r * ldc + j]
  int64_t ldc = 0;                     // 0: N
  const int64_t* c_offsets = nullptr;  // null: entry i at i * M * ldc
  bool accumulate = false;             // C += A @ B instead of C = A @ B
};

// Test hook: true runs every product on the reference path, so that the fallback of CPUs without
// AVX2 is tested on every CPU.
inline std::atomic<bool>& gemm_f64_reference_forced() {
  static std::atomic<bool> forced{false};
  return forced;
}

// Whether gemm_f64 runs on the AVX2+FMA kernel here (SIMD level avx2 or above, after
// MANTISSA_DISABLE_SIMD, and not gemm_f64_reference_forced).
bool gemm_f64_avx2_path();

// Requires M, N, K, batch >= 1. OpenMP over output tiles.
void gemm_f64(const GemmF64Args& args);

// The AVX2 path (gemm_native_f64_avx2.cpp); call only when simd_level() >= SimdLevel::kAvx2.
void gemm_f64_avx2(const GemmF64Args& args);

}  // namespace mantissa::kernels
