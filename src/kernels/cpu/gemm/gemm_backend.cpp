#include "kernels/cpu/gemm/gemm_backend.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

GemmBackend from_env() {
  const char* v = std::getenv("MANTISSA_GEMM");
  return parse_gemm_backend(v != nullptr ? v : "");
}

std::atomic<GemmBackend>& current() {
  static std::atomic<GemmBackend> backend{from_env()};
  return backend;
}

}  // namespace

bool use_native_gemm_avx2(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                          bool a_transposed, int64_t a_rows_apart) {
  // Narrow outputs (a classifier head's 10 columns) take the native dot-product kernel: 1.2x
  // oneDNN's speed in f32 on Zen 3, and bf16/f16 need no widening pass.
  if (N <= kAvx2NarrowMaxN && !a_transposed && K >= kAvx2NarrowMinK) return true;
  if (dtype != kFloat32) {
    // bf16 and f16 have no oneDNN kernel without AVX-512: the alternative is a separate
    // widening pass, which the native kernel's packing avoids.
    return std::min(M, N) >= kAvx2NativeMinSideLow;
  }
  // f32, measured against oneDNN on Zen 3 (2 threads, repeated interleaved runs): the native
  // kernel wins the wide weight gradients (A transposed, N >= 784: 1.0-1.1x), the tall one of
  // the GPT's MLP (1024 x 256 over 2048 tokens: 1.7-1.9x, where oneDNN reaches under half the
  // peak) and the MLP's 1024 -> 1024 input gradient (dY W with a 1024 x 1024 W: 1.7x, oneDNN
  // at ~90 GFLOP/s), is level at 1024^3 and on most forward shapes, and behind on skinny ones
  // (N or M = 10: 0.4-0.9x), the K-256 GPT projections and the 784 -> 1024 input gradient
  // (0.8-0.95x); only the wins run natively.
  // Since then the kernel reads such an A in place and takes all of N per task when each
  // thread has 256+ rows: at the AVX2 level on an Intel Xeon (family 6 model 167) it then
  // matches or beats oneDNN's AVX2 kernels on every forward and input-gradient shape of the
  // models (1.00-1.13x); with these changes and this routing the ViT's 32-true step got 6.5 %
  // faster (docs/performance.md, "Whole-N tasks").
  // On a real Zen 3 (L1 of 8 ways) the products read in place with a short K lost to oneDNN:
  // 0.79-0.89 of its speed on the ViT's forward products (K = 128-384), 0.81-0.84 on the GPT's
  // K-256 ones, while those with K >= 768 were level or ahead; whole training steps alternating
  // both routings step by step in one process ran 2.5-3 % faster for the ViT and 0-4 % for the
  // GPT with those short-K products on oneDNN (docs/performance.md, "A real Zen 3 again").
  if (std::min({M, N, K}) < kAvx2NativeMinSideF32) return false;
  if (!a_transposed) {
    const bool in_place = a_rows_apart > 0 && avx2_reads_a_in_place(dtype, a_rows_apart, 1) &&
                          (l1_has_twelve_ways() || K >= kAvx2InPlaceMinKSmallL1);
    return in_place || std::min(N, K) >= kAvx2NativeMinNKF32;
  }
  return N >= kAvx2NativeMinNF32 || std::min(M, K) >= kAvx2NativeMinMKF32;
}

GemmBackend parse_gemm_backend(std::string_view value) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty() || v == "auto") return GemmBackend::kAuto;
  if (v == "native") return GemmBackend::kNative;
  if (v == "onednn") return GemmBackend::kOnednn;
  fail("MANTISSA_GEMM", "unknown GEMM backend '{}'; valid values are: auto, native, onednn", value);
}

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kNative:
      return "native";
    case GemmBackend::kOnednn:
      return "onednn";
    default:
      return "auto";
  }
}

GemmBackend gemm_backend() { return current().load(std::memory_order_relaxed); }

void set_gemm_backend(GemmBackend backend) { current().store(backend, std::memory_order_relaxed); }

bool use_native_gemm(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K, bool a_transposed,
                     int64_t a_rows_apart) {
  const GemmBackend backend = gemm_backend();
  if (backend == GemmBackend::kOnednn || !gemm_native_supported(dtype)) return false;
  if (backend == GemmBackend::kNative) return true;
  if (gemm_avx2_path(dtype))
    return use_native_gemm_avx2(dtype, batch, M, N, K, a_transposed, a_rows_apart);
  // auto: measured on Zen 4 (docs/performance.md, "Matmul kernels"), the native kernel matches
  // oneDNN per CPU second only when every dimension is large; on the reference models' shapes
  // (a side of 10..784, batch 256) oneDNN is 5-50% faster, so they stay there.
  return M >= kNativeMinSide && N >= kNativeMinSide && K >= kNativeMinSide;
}

}  // namespace mantissa::kernels
