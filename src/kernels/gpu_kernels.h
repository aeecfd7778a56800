#pragma once
// The GPU backend's kernel table: one function pointer per GPU kernel that the layers above call
// (ops; nn's gradient clipping; the optimizers). An op keeps its checks, autocast and graph node,
// and where a tensor is on a GPU it calls the table instead of its CPU loop:
//
//   if (x.is_cuda()) return kernels::gpu_kernels().softmax_forward(x, log, outer, n, inner);
//
// The CUDA backend fills the table (kernels/cuda/gpu_kernels_cuda.cpp, the one file that names
// every family's CUDA code); a build without it has no table, and gpu_kernels() throws a
// mantissa::Error that says how to build one (gpu_kernels_absent.cpp). No tensor can be on a GPU
// in such a build, so no op reaches the table there. The entries are the Tensor-level functions
// of src/kernels/cuda/<family>/*_cuda.h: their comments say what each takes and returns.
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention/flash_attention.h"         // AttnProblem, AttnOperand
#include "kernels/cpu/onednn/onednn_conv.h"                // ConvGeometry
#include "kernels/cuda/batch_norm/batch_norm_cuda.h"       // BatchNormForward, BatchNormGrads
#include "kernels/cuda/elementwise/elementwise_kernels.h"  // EwOp
#include "kernels/cuda/embedding/embedding_cuda.h"         // EmbeddingForward
#include "kernels/cuda/loss/loss_cuda.h"                   // CrossEntropyForward
#include "kernels/cuda/optim/optim_cuda.h"                 // AdamUpdate, SgdUpdate, NormKind
#include "kernels/cuda/pool/pool_cuda.h"                   // PoolShape, MaxPoolResult
#include "mantissa/core/device.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels {

// The op code of the one elementwise kernel (kernels/cuda/elementwise/elementwise_kernels.h).
using EwOp = mantissa::cuda::detail::EwOp;

struct GpuKernels {
  // ---- elementwise (kernels/cuda/elementwise/elementwise_cuda.h) ----
  // op over `ins` (1 to 3) broadcast together (or to *out_shape when not null), converted to
  // dt; a new contiguous tensor of out_dt.
  Tensor (*map)(const char* op, EwOp code, const std::vector<Tensor>& ins, DType dt, DType out_dt,
                double p0, double p1, const Shape* out_shape);
  // A unary op's gradient f(g, x) in g's dtype.
  Tensor (*unary_grad_map)(EwOp code, const Tensor& g, const Tensor& x, double p0, double p1);
  // A binary op's gradient f(g, x, y) in g's dtype, summed back to to_shape.
  Tensor (*binary_grad_map)(EwOp code, const Tensor& g, const Tensor& x, const Tensor& y,
                            const Shape& to_shape);

  // ---- reductions (kernels/cuda/reduce/reduce_cuda.h) ----
  Tensor (*sum)(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape,
                bool mean);
  Tensor (*spread)(const Tensor& g_keep, const Shape& in_shape, int64_t count);
  Tensor (*amax)(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape);
  void (*max_dim)(const Tensor& a, int64_t d, const Tensor& values, const Tensor& indices);
  Tensor (*max_dim_backward)(const Tensor& g_keep, const Tensor& indices_keep,
                             const Shape& in_shape, int64_t d);
  Tensor (*sum_rows)(const Tensor& g2);

  // ---- softmax (kernels/cuda/softmax/softmax_cuda.h) ----
  Tensor (*softmax_forward)(const Tensor& x, bool log, int64_t outer, int64_t n, int64_t inner);
  Tensor (*softmax_backward)(const Tensor& y, const Tensor& g, bool log, int64_t outer, int64_t n,
                             int64_t inner);
  Tensor (*scaled_softmax_forward)(const Tensor& x, double scale, bool causal);
  Tensor (*scaled_softmax_backward)(const Tensor& y, const Tensor& g, double scale);

  // ---- fused attention (kernels/cuda/attention/flash_attention_cuda.h) ----
  bool (*flash_attention_applies)(DType dtype, int64_t E, int64_t Ev);
  void (*flash_attention_forward)(const Device& device, const AttnProblem& p, AttnOperand q,
                                  AttnOperand k, AttnOperand v, AttnOperand o, void* lse);
  void (*flash_attention_backward)(const Device& device, const AttnProblem& p, AttnOperand q,
                                   AttnOperand k, AttnOperand v, AttnOperand o, AttnOperand dout,
                                   const void* lse, AttnOperand dq, AttnOperand dk, AttnOperand dv);

  // ---- losses (kernels/cuda/loss/loss_cuda.h) ----
  gpu::CrossEntropyForward (*cross_entropy_forward)(const Tensor& input, const Tensor& target,
                                                    int64_t ignore_index, double label_smoothing,
                                                    int reduction, int64_t count);
  Tensor (*cross_entropy_backward)(const gpu::CrossEntropyForward& f, const Tensor& grad,
                                   int64_t ignore_index, double label_smoothing, int reduction,
                                   int64_t count);

  // ---- normalisation (kernels/cuda/norm/, kernels/cuda/batch_norm/) ----
  void (*layer_norm_forward)(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                             const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n,
                             double eps);
  void (*layer_norm_backward)(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dx, const Tensor& dw,
                              const Tensor& db, int64_t rows, int64_t n);
  gpu::BatchNormForward (*batch_norm_forward)(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, const Tensor& weight,
                                              const Tensor& bias, bool training, double momentum,
                                              double eps, int64_t n, int64_t c, int64_t s);
  gpu::BatchNormGrads (*batch_norm_backward)(const Tensor& grad, const Tensor& x,
                                             const gpu::BatchNormSaved& sv, bool training,
                                             bool need_x, int64_t n, int64_t c, int64_t s);

  // ---- embedding (kernels/cuda/embedding/embedding_cuda.h) ----
  gpu::EmbeddingForward (*embedding_forward)(const Tensor& weight, const Tensor& indices);
  Tensor (*embedding_backward)(const Tensor& grad, const Tensor& indices, int64_t num, int64_t dim);

  // ---- convolution on cuDNN (kernels/cuda/conv/conv_cuda.h) ----
  Tensor (*conv2d_forward)(const ConvGeometry& g, const Tensor& x, const Tensor& w,
                           bool allow_tf32);
  Tensor (*conv2d_backward_data)(const ConvGeometry& g, const Tensor& gy, const Tensor& w,
                                 bool allow_tf32);
  Tensor (*conv2d_backward_weight)(const ConvGeometry& g, const Tensor& x, const Tensor& gy,
                                   bool allow_tf32);

  // ---- pooling (kernels/cuda/pool/pool_cuda.h) ----
  gpu::MaxPoolResult (*max_pool2d_forward)(const Tensor& x,
                                           const mantissa::cuda::detail::PoolShape& s);
  Tensor (*max_pool2d_backward)(const Tensor& grad, const Tensor& arg, const Shape& shape,
                                DType dtype, const mantissa::cuda::detail::PoolShape& s);
  Tensor (*avg_pool2d_forward)(const Tensor& x, const mantissa::cuda::detail::PoolShape& s,
                               bool count_include_pad, bool adaptive);
  Tensor (*avg_pool2d_backward)(const Tensor& grad, const Shape& shape, DType dtype,
                                const mantissa::cuda::detail::PoolShape& s, bool count_include_pad,
                                bool adaptive);

  // ---- dropout (kernels/cuda/dropout/dropout_cuda.h) ----
  Tensor (*dropout_mask)(const Tensor& x, uint64_t seed, double p);
  Tensor (*dropout_apply_mask)(const Tensor& x, const Tensor& mask, double scale);

  // ---- optimizers and gradient clipping (kernels/cuda/optim/optim_cuda.h) ----
  mantissa::cuda::detail::AdamUpdate (*adam_update_of)(const Tensor& param, const Tensor& grad,
                                                       const std::vector<Tensor>& states,
                                                       const Tensor& master,
                                                       mantissa::cuda::detail::AdamUpdate u,
                                                       const char* where);
  bool (*adam_update)(const Device& device, const mantissa::cuda::detail::AdamUpdate& u);
  bool (*adam_updates)(const Device& device, const mantissa::cuda::detail::AdamUpdate* us,
                       int64_t count);
  bool (*sgd_update)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const Tensor& master, mantissa::cuda::detail::SgdUpdate u, const char* where);
  void (*adam8bit_update)(const Tensor& param, const Tensor& grad,
                          const mantissa::cuda::detail::Adam8bitStep& s, const float* code1,
                          const float* code2, const Tensor& q1, const Tensor& q2,
                          const Tensor& absmax1, const Tensor& absmax2);
  void (*adam32_update)(const Tensor& param, const Tensor& grad,
                        const mantissa::cuda::detail::Adam8bitStep& s, const Tensor& m,
                        const Tensor& v);
  bool (*all_finite)(const std::vector<Tensor>& grads);
  double (*grad_total_norm)(const std::vector<Tensor>& grads, mantissa::cuda::detail::NormKind kind,
                            bool result_f64, const char* where);
  void (*scale_inplace)(const Tensor& t, double coef, const char* where);
};

// The table the CUDA backend filled. Throws mantissa::Error in a build without the CUDA
// backend, naming it and how to build it.
const GpuKernels& gpu_kernels();

}  // namespace mantissa::kernels
