#pragma once
// cuDNN, opened at the first GPU convolution (dlopen) instead of linked, as cuBLAS is
// (kernels/cuda/gemm/cublas_api.h): a CPU-only run of a CUDA build never opens it. libcudnn.so.9
// is a small shim that opens its sub-libraries (libcudnn_cnn, libcudnn_ops, ...) itself when a
// call first needs them.
#if MANTISSA_HAS_CUDA
#include <cudnn.h>

namespace mantissa::kernels::cuda {

// The entry points conv2d calls, named as the library names them.
struct CudnnApi {
#define MANTISSA_CUDNN_ENTRY(name) decltype(&::name) name = nullptr;
#include "kernels/cuda/conv/cudnn_entries.inc"
#undef MANTISSA_CUDNN_ENTRY
};

// Opens libcudnn.so.<CUDNN_MAJOR> and resolves every entry once, on the first call from any
// thread: first in the lib directory of the toolkit mantissa was built against, then on
// LD_LIBRARY_PATH and in ldconfig's cache. Throws mantissa::Error naming the library and what
// to install when it is missing.
const CudnnApi& cudnn_api();

}  // namespace mantissa::kernels::cuda
#endif
