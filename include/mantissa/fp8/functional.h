#pragma once
// The FP8 linear function behind fp8::Linear and fp8::LayerNormLinear (docs/fp8.md "The FP8
// Linear"). Under an enabled Fp8Autocast (Q: the cast with the slot's scale under delayed
// scaling, with the tensor's own amax under current scaling, fp8_recipe()):
//   forward  y  = (Q(x) @ Q(W)^T) * sx_inv * sw_inv + b      x, W in E4M3
//   dgrad    dx = (Q(dy) @ Q(W)) * sdy_inv * sw_inv           dy in E5M2 (HYBRID) or E4M3
//   wgrad    dW = (Q(dy)^T @ Q(x)) * sdy_inv * sx_inv
//   db = column sums of dy in fp32.
// Backward keeps only the FP8 copies of x and W (one byte per element). Outside an enabled
// scope it is nn::functional::linear.
#include <memory>

#include "mantissa/core/storage.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/tensor.h"

namespace mantissa::fp8 {

// The FP8 weight of the last cast, reused while the weight's storage is unchanged (same
// storage, version, format and recipe kind) and, under delayed scaling, its scale is the same:
// between the micro-batches of one optimizer step the weight is cast once (its amax, and so its
// scale, only change when the weight does). Any write through the library (optimizer step,
// load_state_dict, to()) invalidates it. Keying on the scale too keeps a resumed run bit-identical
// to an uninterrupted one.
struct WeightCache {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  int64_t offset = 0;
  Fp8Tensor q;
  float amax = 0.0f;
  DeferredCastStats device_stats;  // a GPU cast's amax, still on the GPU
  float scale = 1.0f;              // the weight scale the cast used
  // The recipe the codes were cast under (current scaling keys on its scale options too).
  RecipeKind kind = RecipeKind::kDelayed;
  bool use_power_2_scales = false;
  float amax_epsilon = 0.0f;
  bool valid = false;
  int64_t hits = 0;  // forwards served from the cache (tests, stats)
  void invalidate() { valid = false; }
};

// state: the layer's ScalingState (slots input, weight, grad_output); cache may be null.
Tensor fp8_linear(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const std::shared_ptr<ScalingState>& state, WeightCache* cache);

}  // namespace mantissa::fp8
