#pragma once
// Checks of FP8 delayed-scaling state that comes from outside a run (a checkpoint's
// `<layer>.fp8_scale` / `<layer>.fp8_amax_history` tensors, the transformer-engine plugin's
// JSON copy of them, a caller's state dict), docs/fp8.md "Checkpointed state". A run never
// writes values these refuse, so such a value means a damaged or edited file, which would
// otherwise evaluate or resume with wrong casts (a negative scale flips every FP8 value's sign).
#include <cstdint>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"

namespace mantissa::fp8 {

// Every scale finite and above 0: a scale is f32(fp8_max * 2^-margin) / amax (FLT_MAX when
// that overflows) or the starting 1. Throws naming `name` (e.g. "'net.0.fp8_scale'"), the
// slot and its role when there are three, and the value.
void check_scales(const std::string& name, const std::vector<float>& scales);

// Every entry of a [rows, slots] amax history (row-major) 0 or above, +inf included (an inf in a
// tensor stays in the window, as in TransformerEngine); never negative, -inf or NaN (no cast
// records a NaN amax: a cast passes over NaN elements). Throws naming `name`, the row, the slot
// and the value.
void check_amax_history(const std::string& name, const std::vector<float>& history, int64_t slots);

// The FP8 state tensors in `state` (keys ending in fp8_scale / fp8_amax_history, any floating
// dtype), checked as above; the message names the key.
void check_state_tensors(const nn::StateDict& state);

}  // namespace mantissa::fp8
