#pragma once
// cuBLAS and cuBLASLt, opened at their first use (dlopen) rather than linked. Linking them would
// make every process of a CUDA build about 210 MiB larger from its start, GPU or not: the loader
// relocates libcublasLt's half-gigabyte image when the program starts (measured: an empty C
// program linked with -lcublasLt peaks at 211 MiB of RSS, against 1 MiB). A CPU-only run
// never opens them; the first GPU product does (docs/cuda.md).
#if MANTISSA_HAS_CUDA
#include <cublasLt.h>
#include <cublas_v2.h>

namespace mantissa::kernels::cuda {

// The entry points the GPU GEMM calls, named as the library names them.
struct CublasApi {
#define MANTISSA_CUBLAS_ENTRY(name) decltype(&::name) name = nullptr;
#include "kernels/cuda/gemm/cublas_entries.inc"
#undef MANTISSA_CUBLAS_ENTRY
  // The exported one (cublasComputeType_t); cublas_api.h adds an inline overload for the old
  // cudaDataType compute type, which decltype could not choose between.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                               int, int, int, const void*, const void*,
                                               cudaDataType, int, long long, const void*,
                                               cudaDataType, int, long long, const void*, void*,
                                               cudaDataType, int, long long, int,
                                               cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// Opens the libraries and resolves every entry once, on the first call from any thread.
// Throws mantissa::Error naming the library and what to install when one is missing.
const CublasApi& cublas_api();

}  // namespace mantissa::kernels::cuda
#endif
