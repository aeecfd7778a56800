#include "kernels/cuda/conv/cudnn_api.h"

#include "kernels/cuda/conv/conv_cuda.h"

#if MANTISSA_HAS_CUDA
#include <dlfcn.h>

#include <string>
#include <vector>

#include "mantissa/core/error.h"

#define MANTISSA_CUDNN_STR2(x) #x
#define MANTISSA_CUDNN_STR(x) MANTISSA_CUDNN_STR2(x)

namespace mantissa::kernels::cuda {
namespace {

constexpr const char* kCudnnSoname = "libcudnn.so." MANTISSA_CUDNN_STR(CUDNN_MAJOR);

void* open_cudnn() {
  std::vector<std::string> tries;
#ifdef MANTISSA_CUDNN_DIR
  tries.push_back(std::string(MANTISSA_CUDNN_DIR) + "/" + kCudnnSoname);
#endif
  tries.emplace_back(kCudnnSoname);
  for (const std::string& path : tries) {
    if (void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
  }
  const char* why = ::dlerror();
  fail("conv2d",
       "a GPU convolution needs cuDNN's {}, which could not be opened ({}): install cuDNN {} for "
       "CUDA {} (the libcudnn{}-cuda-{} packages, or the nvidia-cudnn-cu{} wheel), or put its lib "
       "directory on LD_LIBRARY_PATH",
       kCudnnSoname, why != nullptr ? why : "not found", CUDNN_MAJOR, MANTISSA_CUBLAS_MAJOR,
       CUDNN_MAJOR, MANTISSA_CUBLAS_MAJOR, MANTISSA_CUBLAS_MAJOR);
}

CudnnApi load() {
  void* lib = open_cudnn();
  auto find = [&](const char* name) {
    void* f = ::dlsym(lib, name);
    MANTISSA_CHECK(f != nullptr, "conv2d",
                   "the cuDNN library that was opened ({}) has no {} (it is older than the cuDNN "
                   "{}.{} headers mantissa was built with)",
                   kCudnnSoname, name, CUDNN_MAJOR, CUDNN_MINOR);
    return f;
  };
  CudnnApi api;
#define MANTISSA_CUDNN_ENTRY(name) api.name = reinterpret_cast<decltype(api.name)>(find(#name));
#include "kernels/cuda/conv/cudnn_entries.inc"
#undef MANTISSA_CUDNN_ENTRY
  const size_t version = api.cudnnGetVersion();
  MANTISSA_CHECK(version / 10000 == CUDNN_MAJOR, "conv2d",
                 "{} reports cuDNN version {}, but mantissa was built with cuDNN {} headers",
                 kCudnnSoname, version, CUDNN_MAJOR);
  return api;
}

}  // namespace

const CudnnApi& cudnn_api() {
  static const CudnnApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

int cudnn_entry_points_found() {
  const CudnnApi& api = cudnn_api();
  int found = 0;
#define MANTISSA_CUDNN_ENTRY(name) found += api.name != nullptr ? 1 : 0;
#include "kernels/cuda/conv/cudnn_entries.inc"
#undef MANTISSA_CUDNN_ENTRY
  return found;
}

}  // namespace mantissa::kernels::cuda
#else
namespace mantissa::kernels::cuda {
int cudnn_entry_points_found() { return 0; }
}  // namespace mantissa::kernels::cuda
#endif
