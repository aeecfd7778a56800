// cuBLAS and cuBLASLt are opened at the first GPU product, not linked (cublas_api.h): a CUDA
// build's CPU-only runs do not carry their ~210 MiB from the start. These checks need no GPU:
// the libraries open and every entry point the GEMM calls is found (a name spelled wrong, or a
// cuBLAS older than the toolkit, fails here rather than at a user's first GPU product).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kernels/cuda/gemm/cuda_gemm.h"
#include "mantissa/core/cuda.h"

namespace mantissa {
namespace {

// The GEMM's entry points: 17 in cublas_entries.inc and cublasGemmStridedBatchedEx.
constexpr int kCublasEntryPoints = 18;

bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcublas") != std::string::npos) return true;
  return false;
}

TEST(CublasLoading, EveryEntryPointIsFoundWithoutAGpu) {
  if (!cuda::is_built()) {
    EXPECT_EQ(kernels::cuda::cublas_entry_points_found(), 0);
    GTEST_SKIP() << "built without the CUDA backend: no cuBLAS to open";
  }
  EXPECT_EQ(kernels::cuda::cublas_entry_points_found(), kCublasEntryPoints);
  EXPECT_TRUE(cublas_mapped());
}

}  // namespace
}  // namespace mantissa
