#include "kernels/cuda/gemm/cublas_api.h"

#include "kernels/cuda/gemm/cuda_gemm.h"

#if MANTISSA_HAS_CUDA
#include <dlfcn.h>

#include <string>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::kernels::cuda {
namespace {

// Where to look: the directory of the toolkit mantissa was built against first (CMake passes
// it), then the loader's own search (LD_LIBRARY_PATH, ldconfig's cache): a machine that runs a
// build made elsewhere finds the libraries where its driver's toolkit put them.
void* open_library(const char* soname) {
  std::vector<std::string> tries;
#ifdef MANTISSA_CUBLAS_DIR
  tries.push_back(std::string(MANTISSA_CUBLAS_DIR) + "/" + soname);
#endif
  tries.emplace_back(soname);
  for (const std::string& path : tries) {
    // RTLD_GLOBAL: libcublas resolves cublasLt's symbols through the global scope.
    if (void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
  }
  const char* why = ::dlerror();
  fail("matmul",
       "this GPU product needs {}, which could not be opened ({}): install the CUDA toolkit's "
       "cuBLAS (the libcublas-13 packages, or the toolkit's lib directory on LD_LIBRARY_PATH)",
       soname, why != nullptr ? why : "not found");
}

CublasApi load() {
  // cuBLASLt first: libcublas needs it.
  void* lt = open_library("libcublasLt.so." MANTISSA_CUBLAS_MAJOR);
  void* blas = open_library("libcublas.so." MANTISSA_CUBLAS_MAJOR);
  auto find = [&](const char* name) {
    void* f = ::dlsym(name[6] == 'L' && name[7] == 't' ? lt : blas, name);
    MANTISSA_CHECK(f != nullptr, "matmul",
                   "the cuBLAS library that was opened has no {} (it is older than the CUDA {} "
                   "toolkit mantissa was built with)",
                   name, MANTISSA_CUBLAS_MAJOR);
    return f;
  };
  CublasApi api;
#define MANTISSA_CUBLAS_ENTRY(name) api.name = reinterpret_cast<decltype(api.name)>(find(#name));
#include "kernels/cuda/gemm/cublas_entries.inc"
#undef MANTISSA_CUBLAS_ENTRY
  api.cublasGemmStridedBatchedEx = reinterpret_cast<decltype(api.cublasGemmStridedBatchedEx)>(
      find("cublasGemmStridedBatchedEx"));
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

int cublas_entry_points_found() {
  const CublasApi& api = cublas_api();
  int found = api.cublasGemmStridedBatchedEx != nullptr ? 1 : 0;
#define MANTISSA_CUBLAS_ENTRY(name) found += api.name != nullptr ? 1 : 0;
#include "kernels/cuda/gemm/cublas_entries.inc"
#undef MANTISSA_CUBLAS_ENTRY
  return found;
}

}  // namespace mantissa::kernels::cuda
#else
namespace mantissa::kernels::cuda {
int cublas_entry_points_found() { return 0; }
}  // namespace mantissa::kernels::cuda
#endif
