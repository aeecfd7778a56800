#pragma once
// Delayed-scaling state of one FP8 module (TransformerEngine's fp8_meta, docs/fp8.md "Scales
// and the amax history"): per tensor slot a scale and a window of recent amaxes. The state
// lives in two fp32 tensors so a module can register them as buffers and checkpoints carry
// them: scale [slots] (starts at 1) and amax_history [history_len, slots] (starts at 0), row 0
// being the current step's accumulator.
#include <cstdint>
#include <memory>
#include <vector>

#include "mantissa/core/tensor.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

// Overflow/underflow counts of one slot since they were last taken (not checkpointed).
struct CastCounts {
  int64_t total = 0;      // elements cast
  int64_t saturated = 0;  // |x * scale| above the format's max (clamped to ±max)
  int64_t flushed = 0;    // x != 0 that became ±0
  // The largest max|x| * scale / fp8_max of the casts: how much of the format's range the
  // largest value took (above 1: values saturated). docs/fp8.md "Watching the scales".
  double peak = 0.0;
};

// While one lives on this thread, casts record nothing into any ScalingState (record_amax,
// set_last_cast, add_counts and defer_cast_stats do nothing): an activation checkpoint's replay
// recomputes the casts its first forward recorded (autocast.cpp), which must not count twice.
class CastStatsPause {
 public:
  CastStatsPause();
  ~CastStatsPause();
  CastStatsPause(const CastStatsPause&) = delete;
  CastStatsPause& operator=(const CastStatsPause&) = delete;
  static bool active();
};

// Where a GPU cast left its amax and counts (kernels/cuda/fp8/fp8_cuda.h): an entry of a
// device buffer shared by many casts, read back for all of them at once. Opaque here.
struct DeferredCastStats {
  std::shared_ptr<void> block;
  int64_t index = -1;
  float scale = 1.0f;  // the cast's scale and its format's max: for CastCounts::peak
  float fp8_max = 0.0f;
  bool defined() const { return block != nullptr; }
};

// One update of a slot's scale from its history column, exactly TransformerEngine's fused
// delayed-scaling kernel. `history` points at H[0] of the column, consecutive entries `stride`
// floats apart. When H[0] == 0 nothing changes (a module that did not run, or saw only zeros).
// Otherwise (a NaN H[0] included: it is not 0): amax = fmaxf(0, H[0], ..., H[L-1]) ("max", so
// NaN entries are passed over) or H[0] ("most_recent"); the column rolls (H[1], the oldest
// entry, is dropped, H[0] moves to H[L-1], H[0] becomes 0); and scale becomes
// f32(f32(fp8_max * 2^-margin) / amax) when amax is finite and positive, is kept otherwise,
// and is clamped to FLT_MAX when the division overflows. Returns whether it ran. When the scale
// was computed (not kept) and `scale_amax` is given, *scale_amax is the amax it came from.
bool update_scale(float* history, int64_t history_len, int64_t stride, float& scale, float fp8_max,
                  int margin, AmaxComputeAlgo algo, float* scale_amax = nullptr);

class ScalingState {
 public:
  explicit ScalingState(int64_t num_slots = kNumRoles, int64_t history_len = 1024);

  int64_t num_slots() const { return scale.numel(); }
  int64_t history_len() const { return amax_history.size(0); }

  float scale_of(int slot) const;
  // f32(1 / scale): what dequantisation multiplies by (TransformerEngine's scale_inv).
  float scale_inv_of(int slot) const;
  // The current step's accumulated amax H[0].
  float current_amax(int slot) const;
  // H[0] = max(H[0], amax). A NaN amax makes H[0] NaN for the rest of the step, as a NaN
  // reduced amax is TransformerEngine's step amax: the next update rolls it into the window
  // (update_scale). No cast records one (a cast's amax passes over NaN elements, as CUDA's
  // fmaxf does); it comes only from an amax reducer (set_amax_reducer) or a caller.
  void record_amax(int slot, float amax);
  // update_scale for one slot with the recipe's margin and algo.
  bool update(int slot, float fp8_max, const DelayedScaling& recipe);
  // The amax the slot's current scale was computed from (so scale = f32(fp8_max * 2^-margin) /
  // scale_amax, or FLT_MAX), or 0 while the scale is the starting 1 or a loaded one (not
  // checkpointed: a resumed run has it after its first update).
  float scale_amax(int slot) const;
  // Current scaling (current_scaling.h): a cast of amax `amax` ran with `scale`. Sets the slot's
  // scale, H[0] = amax (row 0 holds the last cast's amax; no window rolls) and scale_amax.
  void set_last_cast(int slot, float amax, float scale);
  // The slot's history column, H[0] first.
  std::vector<float> history_of(int slot) const;

  void add_counts(int slot, const CastCounts& c);

  // A GPU cast's amax and counts, left on the GPU (QuantizeResult::device_stats) so that the
  // cast does not wait for the GPU; they are recorded as record_amax / add_counts would, all of a
  // step's at once, before anything reads the slot's amax, history or counts (current_amax,
  // update, history_of, take_counts) and at the end of every Fp8Autocast scope. total: the
  // cast's element count; 0 records the amax alone (a cached weight cast seen again).
  void defer_cast_stats(int slot, DeferredCastStats stats, int64_t total);
  // Records the deferred statistics of every state (one transfer from the GPU for all of them).
  static void resolve_deferred(const std::vector<const ScalingState*>& states);
  // The counts since the last call, then resets them.
  CastCounts take_counts(int slot);

  Tensor scale;         // [slots] float32
  Tensor amax_history;  // [history_len, slots] float32

 private:
  float* hist(int slot) const;
  void resolve_own() const;
  // Mutable: the deferred statistics land in the history and counts when a const reader needs
  // them.
  mutable std::vector<CastCounts> counts_;
  std::vector<float> scale_amax_;
  struct Deferred {
    int slot;
    DeferredCastStats stats;
    int64_t total;
  };
  mutable std::vector<Deferred> deferred_;
};

}  // namespace mantissa::fp8
