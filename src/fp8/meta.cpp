#include "mantissa/fp8/meta.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/fp8/fp8_cuda.h"
#endif

namespace mantissa::fp8 {

bool update_scale(float* history, int64_t history_len, int64_t stride, float& scale, float fp8_max,
                  int margin, AmaxComputeAlgo algo, float* scale_amax) {
  const float current = history[0];
  // A NaN amax is not zero: the column rolls, as TransformerEngine's `last_amax != 0` test does.
  if (current == 0.0f) return false;
  float amax = current;
  if (algo == AmaxComputeAlgo::kMax) {
    // fmaxf from 0 over the whole column, H[0] included: a NaN entry never wins (fmax returns
    // the other operand), so a NaN current amax gives the largest of the other entries.
    amax = 0.0f;
    for (int64_t i = 0; i < history_len; ++i) amax = std::fmax(amax, history[i * stride]);
  }
  // Roll left by one: H[1] (the oldest) drops out, H[0] becomes the newest entry H[L-1].
  if (history_len > 1) {
    for (int64_t i = 1; i + 1 < history_len; ++i) history[i * stride] = history[(i + 1) * stride];
    history[(history_len - 1) * stride] = current;
  }
  history[0] = 0.0f;
  const float scaled_max = fp8_max * std::ldexp(1.0f, -margin);
  if (std::isfinite(amax) && amax > 0.0f) {
    float s = scaled_max / amax;
    if (std::isinf(s)) s = std::numeric_limits<float>::max();
    scale = s;
    if (scale_amax != nullptr) *scale_amax = amax;
  }
  return true;
}

namespace {

// record_amax's rule: the larger amax, and NaN once either is NaN.
void accumulate_amax(float& h0, float amax) {
  if (std::isnan(amax) || std::isnan(h0)) {
    h0 = std::numeric_limits<float>::quiet_NaN();
  } else if (amax > h0) {
    h0 = amax;
  }
}

}  // namespace

ScalingState::ScalingState(int64_t num_slots, int64_t history_len)
    : scale(ones({num_slots}, kFloat32)),
      amax_history(zeros({history_len, num_slots}, kFloat32)),
      counts_(static_cast<size_t>(num_slots)),
      scale_amax_(static_cast<size_t>(num_slots), 0.0f) {
  MANTISSA_CHECK(num_slots >= 1, "fp8 meta", "need at least one slot, got {}", num_slots);
  MANTISSA_CHECK(history_len >= 1, "fp8 recipe",
                 "amax_history_len must be at least 1 (the current step's slot), got {}",
                 history_len);
}

float* ScalingState::hist(int slot) const {
  MANTISSA_CHECK(slot >= 0 && slot < num_slots(), "fp8 meta", "slot {} out of range [0, {})", slot,
                 num_slots());
  return amax_history.data<float>() + slot;
}

float ScalingState::scale_of(int slot) const { return scale.data<float>()[slot]; }

float ScalingState::scale_inv_of(int slot) const { return 1.0f / scale_of(slot); }

float ScalingState::current_amax(int slot) const {
  resolve_own();
  return hist(slot)[0];
}

namespace {
constinit thread_local int t_cast_stats_pauses = 0;
}  // namespace

CastStatsPause::CastStatsPause() { ++t_cast_stats_pauses; }
CastStatsPause::~CastStatsPause() { --t_cast_stats_pauses; }
bool CastStatsPause::active() { return t_cast_stats_pauses > 0; }

void ScalingState::record_amax(int slot, float amax) {
  if (CastStatsPause::active()) return;
  accumulate_amax(hist(slot)[0], amax);
}

bool ScalingState::update(int slot, float fp8_max, const DelayedScaling& recipe) {
  resolve_own();
  return update_scale(hist(slot), history_len(), num_slots(), scale.data<float>()[slot], fp8_max,
                      recipe.margin, recipe.amax_compute_algo,
                      &scale_amax_.at(static_cast<size_t>(slot)));
}

void ScalingState::set_last_cast(int slot, float amax, float scale_value) {
  if (CastStatsPause::active()) return;
  hist(slot)[0] = amax;
  scale.data<float>()[slot] = scale_value;
  scale_amax_.at(static_cast<size_t>(slot)) = amax;
}

float ScalingState::scale_amax(int slot) const { return scale_amax_.at(static_cast<size_t>(slot)); }

std::vector<float> ScalingState::history_of(int slot) const {
  resolve_own();
  std::vector<float> out(static_cast<size_t>(history_len()));
  const float* h = hist(slot);
  for (int64_t i = 0; i < history_len(); ++i) out[static_cast<size_t>(i)] = h[i * num_slots()];
  return out;
}

void ScalingState::add_counts(int slot, const CastCounts& c) {
  if (CastStatsPause::active()) return;
  CastCounts& d = counts_.at(static_cast<size_t>(slot));
  d.total += c.total;
  d.saturated += c.saturated;
  d.flushed += c.flushed;
  d.peak = std::max(d.peak, c.peak);
}

CastCounts ScalingState::take_counts(int slot) {
  resolve_own();
  CastCounts out = counts_.at(static_cast<size_t>(slot));
  counts_[static_cast<size_t>(slot)] = {};
  return out;
}

void ScalingState::defer_cast_stats(int slot, DeferredCastStats stats, int64_t total) {
  if (CastStatsPause::active()) return;
  (void)hist(slot);  // checks the slot
  MANTISSA_CHECK(stats.defined(), "fp8 meta", "internal error: no GPU cast statistics to defer");
  deferred_.push_back({slot, std::move(stats), total});
}

void ScalingState::resolve_own() const {
  if (!deferred_.empty()) resolve_deferred({this});
}

void ScalingState::resolve_deferred(const std::vector<const ScalingState*>& states) {
  for (const ScalingState* s : states) {
    for (const Deferred& d : s->deferred_) {
#if MANTISSA_HAS_CUDA
      // The first read waits for the GPU and fetches every cast's entry made so far.
      const kernels::gpu::Fp8CastStats st =
          kernels::gpu::read_fp8_cast_stats(d.stats.block, d.stats.index);
      accumulate_amax(s->hist(d.slot)[0], st.amax);  // as record_amax
      if (d.total > 0) {
        CastCounts& c = s->counts_.at(static_cast<size_t>(d.slot));
        c.total += d.total;
        c.saturated += st.saturated;
        c.flushed += st.flushed;
        if (d.stats.fp8_max > 0.0f)
          c.peak = std::max(c.peak, static_cast<double>(st.amax) * d.stats.scale / d.stats.fp8_max);
      }
#else
      (void)d;
      fail("fp8 meta", "internal error: GPU cast statistics in a build without the CUDA backend");
#endif
    }
    s->deferred_.clear();
  }
}

}  // namespace mantissa::fp8
