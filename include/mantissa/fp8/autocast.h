#pragma once
// fp8_autocast (TransformerEngine's fp8_autocast / te.autocast, docs/fp8.md "When scales
// change"): inside an enabled scope, FP8 layers run their GEMMs on FP8 operands with the
// scope's recipe; outside they compute in their own precision. Scopes nest; the outermost exit
// of an enabled scope with grad mode on updates the forward scales (input, weight) of every
// FP8 module that ran in it. Backward scales (grad_output) are updated at the end of the
// backward of the first FP8 module of the scope, which is the last backward to run. Both updates
// are delayed scaling's: under another recipe kind no scale is updated there (each cast finds
// its own). An activation checkpoint's replay (nn/checkpoint.h) is a scope of its own: it casts
// with the forward scales its first forward used, updates none at its exit, and its backward
// updates the grad_output scales of its layers.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

// The states whose backward slots one scope's backward pass updates.
struct BackwardUpdateGroup {
  DelayedScaling recipe;
  std::vector<std::shared_ptr<ScalingState>> states;
  // Runs the grad_output update of every state once.
  void run();
};

class Fp8Autocast {
 public:
  explicit Fp8Autocast(bool enabled = true, DelayedScaling recipe = {});
  ~Fp8Autocast();
  Fp8Autocast(const Fp8Autocast&) = delete;
  Fp8Autocast& operator=(const Fp8Autocast&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

// Whether FP8 execution is on in this thread, and the recipe in effect.
bool fp8_enabled();
const Recipe& fp8_recipe();

// Called by an FP8 layer on each FP8 forward: registers `state` for the forward update at the
// scope's exit and for the backward update. Returns the backward group when this module is the
// first of the scope (its backward node runs the group), nullptr otherwise.
std::shared_ptr<BackwardUpdateGroup> register_fp8_forward(
    const std::shared_ptr<ScalingState>& state);

// Data-parallel training (docs/distributed.md) makes every rank update its scales from the
// amaxes of all ranks, as TransformerEngine's reduce_amax does: before each scale update the
// current amaxes (H[0] of the slots being updated) go through this function, which replaces
// each by its maximum over the ranks. Process-wide; an empty function (the default) turns it off.
using AmaxReducer = std::function<void(float* amaxes, int64_t count)>;
void set_amax_reducer(AmaxReducer reducer);
// Replaces each of the `count` amaxes by its maximum over the ranks through the installed
// reducer; nothing without one. Current scaling calls it for every cast (all ranks cast the
// same tensors in the same order).
void reduce_amaxes_across_ranks(float* amaxes, int64_t count);

// Runs the forward (input, weight) update of one state with a recipe; the scope calls it.
void update_forward_scales(ScalingState& state, const DelayedScaling& recipe);

}  // namespace mantissa::fp8
