#include "mantissa/fp8/functional.h"

#include <string>
#include <vector>

#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/block_linear.h"
#include "mantissa/fp8/current_scaling.h"
#include "mantissa/fp8/mx_linear.h"
#include "mantissa/fp8/nvfp4_linear.h"
#include "mantissa/fp8/rowwise_linear.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/functional.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

constexpr int kIn = static_cast<int>(Role::kInput);
constexpr int kW = static_cast<int>(Role::kWeight);
constexpr int kDy = static_cast<int>(Role::kGradOutput);

// GCC 12 reports a false -Wstringop-overflow on the inlined atomic load of the storage's
// version (GCC bug 104475, atomics after a null check); the pointer is checked non-null.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
Fp8Tensor cast_weight(const Tensor& weight, DType fp8, ScalingState& state, WeightCache* cache,
                      const Recipe& recipe) {
  const std::shared_ptr<Storage>& storage = weight.storage();
  const bool current = recipe.kind == RecipeKind::kCurrent;
  const bool same_weight = cache && cache->valid && storage && cache->storage.lock() == storage &&
                           cache->version == storage->version() &&
                           cache->offset == weight.offset() && cache->q.dtype() == fp8 &&
                           cache->q.shape() == weight.shape() && cache->kind == recipe.kind;
  if (current) {
    // Current scaling: an unchanged weight has the same amax, so the same scale and codes
    // (the recipe's scale options are part of the key).
    if (same_weight && cache->use_power_2_scales == recipe.use_power_2_scales &&
        cache->amax_epsilon == recipe.amax_epsilon) {
      ++cache->hits;
      state.set_last_cast(kW, cache->amax, cache->scale);
      return cache->q;
    }
    Fp8Tensor q = quantize_current(weight, fp8, state, kW, recipe, /*widen=*/cache != nullptr);
    if (cache) {
      cache->storage = storage;
      cache->version = storage->version();
      cache->offset = weight.offset();
      cache->q = q;
      cache->amax = state.current_amax(kW);
      cache->device_stats = {};
      cache->scale = state.scale_of(kW);
      cache->kind = recipe.kind;
      cache->use_power_2_scales = recipe.use_power_2_scales;
      cache->amax_epsilon = recipe.amax_epsilon;
      cache->valid = true;
    }
    return q;
  }
  if (same_weight && cache->scale == state.scale_of(kW)) {
    ++cache->hits;
    if (cache->device_stats.defined())
      state.defer_cast_stats(kW, cache->device_stats, /*total=*/0);  // the amax again, no counts
    else
      state.record_amax(kW, cache->amax);
    return cache->q;
  }
  // The weight goes through the forward and the input-gradient GEMMs of every micro-batch of
  // the step: with a cache, its codes are widened by the cast (where fp8_gemm widens) and kept.
  // On a GPU the cast also makes W^T, which the input-gradient product reads.
  QuantizeResult r = quantize_async(weight, fp8, state.scale_of(kW), /*widen=*/cache != nullptr,
                                    /*transpose=*/true);
  record_cast(state, kW, r);
  if (cache) {
    cache->storage = storage;
    cache->version = storage->version();
    cache->offset = weight.offset();
    cache->q = r.q;
    cache->amax = r.amax;
    cache->device_stats = r.device_stats;
    cache->scale = state.scale_of(kW);
    cache->kind = recipe.kind;
    cache->valid = true;
  }
  return r.q;
}
#pragma GCC diagnostic pop

// Column sums of dy (rows, n) in fp32, rounded once to `dtype`. A bf16/f16 dy is
// widened one row at a time (exact), not copied whole to fp32 first.
Tensor bias_grad(const Tensor& dy2, DType dtype) {
  if (dy2.is_cuda()) {  // the GPU's deterministic column sums accumulate in fp32
    if (dtype == dy2.dtype()) return sum(dy2, {0});
    return sum(dy2.to(kFloat32), {0}).to(dtype);
  }
  if (dtype == dy2.dtype()) return kernels::sum_rows(dy2);  // nn::Linear's (vectorised, threaded)
  const Tensor g = dy2.contiguous();
  const int64_t rows = g.size(0), n = g.size(1);
  Tensor out = zeros({n}, kFloat32);
  float* acc = out.data<float>();
  const DType dt = g.dtype();
  if (dt == kFloat32) {
    const float* src = g.data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) acc[j] += src[r * n + j];
  } else {
    std::vector<float> row(static_cast<size_t>(n));
    const auto* src = static_cast<const char*>(g.data_ptr());
    const size_t item = dt.itemsize();
    for (int64_t r = 0; r < rows; ++r) {
      convert_buffer(src + r * n * item, dt, row.data(), kFloat32, n);
      for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
    }
  }
  return dtype == kFloat32 ? out : out.to(dtype);
}

// The cast of an activation or gradient for `slot` under the recipe's kind.
Fp8Tensor cast_slot(const Tensor& x, DType fp8, ScalingState& state, int slot,
                    const Recipe& recipe) {
  if (recipe.kind == RecipeKind::kCurrent)
    return quantize_current(x, fp8, state, slot, recipe, /*widen=*/true);
  // transpose: on a GPU, x^T for the product that reads x transposed, from the same pass.
  return quantize_into(x, fp8, state, slot, /*widen=*/true, /*transpose=*/true);
}

}  // namespace

Tensor fp8_linear(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const std::shared_ptr<ScalingState>& state, WeightCache* cache) {
  if (!fp8_enabled()) return nn::functional::linear(input, weight, bias);
  MANTISSA_PROFILE_OP("fp8_linear");
  const Recipe recipe = fp8_recipe();
  // A checkpoint's replay (autocast.cpp) must compute the values of its first forward.
  if (nn::in_checkpoint()) {
    const std::string refusal = recipe.checkpoint_refusal();
    MANTISSA_CHECK(refusal.empty(), "fp8 linear",
                   "an FP8 layer cannot run inside activation checkpointing (nn::checkpoint) "
                   "under the '{}' recipe: {}",
                   recipe_kind_name(recipe.kind), refusal);
  }
  MANTISSA_CHECK(weight.dim() == 2, "fp8 linear", "weight must be 2-D, got {}",
                 shape_str(weight.shape()));
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  MANTISSA_CHECK(input.dim() >= 1 && input.size(-1) == in_f, "fp8 linear",
                 "input of shape {} does not match weight of shape {} (expected last dim {})",
                 shape_str(input.shape()), shape_str(weight.shape()), in_f);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == out_f, "fp8 linear",
                   "bias of shape {} does not match {} output features", shape_str(bias.shape()),
                   out_f);
  }
  if (recipe.kind == RecipeKind::kRowwise || recipe.kind == RecipeKind::kRowwiseGwHp)
    return fp8_linear_rowwise(input, weight, bias, state, recipe);
  if (recipe.kind == RecipeKind::kBlock)
    return fp8_linear_block(input, weight, bias, state, recipe);
  if (recipe.kind == RecipeKind::kMxfp8 || recipe.kind == RecipeKind::kMxfp4)
    return fp8_linear_mx(input, weight, bias, state, recipe);
  if (recipe.kind == RecipeKind::kNvfp4)
    return fp8_linear_nvfp4(input, weight, bias, state, recipe);
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  Fp8Tensor qx = cast_slot(x2, recipe.dtype_of(Role::kInput), *state, kIn, recipe);
  const Fp8Tensor qw =
      cast_weight(weight.detach(), recipe.dtype_of(Role::kWeight), *state, cache, recipe);
  std::shared_ptr<BackwardUpdateGroup> group = register_fp8_forward(state);

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  Tensor y =
      fp8_gemm(qx, false, qw, true, bias.defined() ? bias.detach() : Tensor(), act).view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;
  // Saved for backward: the codes only, one byte per element. A GPU cast made x^T as well, which
  // is all the weight-gradient product reads there: that alone is kept, as (in, rows) codes the
  // product takes transposed (dW = dy^T @ (x^T)^T).
  const bool keep_x_transposed = qx.transposed.defined();
  const Fp8Tensor qx_saved = keep_x_transposed
                                 ? Fp8Tensor{qx.transposed, qx.scale_inv, Tensor(), Tensor()}
                                 : Fp8Tensor{qx.data, qx.scale_inv, Tensor(), Tensor()};
  qx = Fp8Tensor();

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  const DType dy_fp8 = recipe.dtype_of(Role::kGradOutput);
  return autograd::record(y, {input, weight, bias}, "Fp8LinearBackward",
                          [=](const Tensor& grad) -> std::vector<Tensor> {
                            const Tensor dy2 = grad.reshape({rows, out_f});
                            const Fp8Tensor qdy = cast_slot(dy2, dy_fp8, *state, kDy, recipe);
                            Tensor dx, dw, db;
                            if (need_x)
                              dx = fp8_gemm(qdy, false, qw, false, Tensor(), act).view(x_shape);
                            if (need_w)
                              dw = fp8_gemm(qdy, true, qx_saved, keep_x_transposed, Tensor(),
                                            w_dtype);
                            if (need_b) db = bias_grad(dy2, b_dtype);
                            // The first FP8 module of the scope finishes the backward pass: update
                            // every grad_output scale of the scope now that all their amaxes are
                            // in.
                            if (group) group->run();
                            return {dx, dw, db};
                          });
}

}  // namespace mantissa::fp8
