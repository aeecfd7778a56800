#pragma once
// Current scaling (TransformerEngine 2.x's Float8CurrentScaling, docs/fp8.md "Recipes"): each
// cast takes the amax of the tensor it casts, just in time, and quantizes with
// scale = fp8_max / amax. No amax history is kept; the layer's ScalingState holds the scale
// and amax of each slot's last cast (for statistics and checkpoints).
#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/fp8/tensor.h"

namespace mantissa::fp8 {

// max |x| over a float32, bfloat16 or float16 CPU tensor: NaN elements are passed over (as
// CUDA's fmaxf in TransformerEngine's amax kernel), an inf is kept; 0 for an empty or all-NaN
// tensor. Exact (the largest magnitude itself, widened to float32).
float tensor_amax(const Tensor& x);

// TransformerEngine's compute_scale_from_amax for current scaling: the amax is raised to
// `epsilon` when below it; an amax that is 0, inf or NaN gives scale 1; otherwise
// scale = f32(fp8_max / amax) (one IEEE division), FLT_MAX where that overflows, and with
// `power_2` its mantissa bits cleared (rounded down to a power of 2).
float current_scale(float amax, float fp8_max, bool power_2, float epsilon);

// Casts x for `slot` under a current-scaling recipe: its amax (reduced across ranks by the
// installed amax reducer, set_amax_reducer), the scale from it, then quantize(); the slot's
// scale, amax (row 0 of the history) and counts record the cast. CPU tensors only: a GPU
// tensor is refused (the GPU casts' amax stays on the GPU).
Fp8Tensor quantize_current(const Tensor& x, DType fp8, ScalingState& state, int slot,
                           const Recipe& recipe, bool widen = false);

// The scale current scaling gives a tensor of amax `amax` cast to `fp8` under `recipe`.
float current_scale_for(float amax, DType fp8, const Recipe& recipe);

}  // namespace mantissa::fp8
