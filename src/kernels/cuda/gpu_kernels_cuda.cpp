// The CUDA backend's kernel table (gpu_kernels.h): every entry points at the Tensor-level CUDA
// function of its family. The one file that names them all; a build without the CUDA backend
// compiles kernels/gpu_kernels_absent.cpp instead.
#include "kernels/gpu_kernels.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/attention/flash_attention_cuda.h"
#include "kernels/cuda/batch_norm/batch_norm_cuda.h"
#include "kernels/cuda/conv/conv_cuda.h"
#include "kernels/cuda/dropout/dropout_cuda.h"
#include "kernels/cuda/elementwise/elementwise_cuda.h"
#include "kernels/cuda/embedding/embedding_cuda.h"
#include "kernels/cuda/loss/loss_cuda.h"
#include "kernels/cuda/norm/layer_norm_cuda.h"
#include "kernels/cuda/optim/optim_cuda.h"
#include "kernels/cuda/pool/pool_cuda.h"
#include "kernels/cuda/reduce/reduce_cuda.h"
#include "kernels/cuda/softmax/softmax_cuda.h"

namespace mantissa::kernels {

namespace {

// Designated initializers: an entry named twice or out of order does not compile; a missing
// one is null, which tests/kernels/test_gpu_kernels_table.cpp refuses.
constexpr GpuKernels kCudaKernels{
    .map = &gpu::map,
    .unary_grad_map = &gpu::grad_map,
    .binary_grad_map = &gpu::grad_map,

    .sum = &gpu::sum,
    .spread = &gpu::spread,
    .amax = &gpu::amax,
    .max_dim = &gpu::max_dim,
    .max_dim_backward = &gpu::max_dim_backward,
    .sum_rows = &gpu::sum_rows,

    .softmax_forward = &gpu::softmax_forward,
    .softmax_backward = &gpu::softmax_backward,
    .scaled_softmax_forward = &gpu::scaled_softmax_forward,
    .scaled_softmax_backward = &gpu::scaled_softmax_backward,

    .flash_attention_applies = &gpu::flash_attention_applies,
    .flash_attention_forward = &gpu::flash_attention_forward,
    .flash_attention_backward = &gpu::flash_attention_backward,

    .cross_entropy_forward = &gpu::cross_entropy,
    .cross_entropy_backward = &gpu::cross_entropy_backward,

    .layer_norm_forward = &gpu::layer_norm_forward,
    .layer_norm_backward = &gpu::layer_norm_backward,
    .batch_norm_forward = &gpu::batch_norm_forward,
    .batch_norm_backward = &gpu::batch_norm_backward,

    .embedding_forward = &gpu::embedding_forward,
    .embedding_backward = &gpu::embedding_backward,

    .conv2d_forward = &gpu::conv2d_forward,
    .conv2d_backward_data = &gpu::conv2d_backward_data,
    .conv2d_backward_weight = &gpu::conv2d_backward_weight,

    .max_pool2d_forward = &gpu::max_pool2d_forward,
    .max_pool2d_backward = &gpu::max_pool2d_backward,
    .avg_pool2d_forward = &gpu::avg_pool2d_forward,
    .avg_pool2d_backward = &gpu::avg_pool2d_backward,

    .dropout_mask = &gpu::dropout_mask,
    .dropout_apply_mask = &gpu::apply_mask,

    .adam_update_of = &gpu::adam_update_of,
    .adam_update = &gpu::adam_update,
    .adam_updates = &gpu::adam_updates,
    .sgd_update = &gpu::sgd_update,
    .adam8bit_update = &gpu::adam8bit_update,
    .adam32_update = &gpu::adam32_update,
    .all_finite = &gpu::all_finite,
    .grad_total_norm = &gpu::grad_total_norm,
    .scale_inplace = &gpu::scale_inplace,
};

}  // namespace

const GpuKernels& gpu_kernels() { return kCudaKernels; }

}  // namespace mantissa::kernels

#endif
