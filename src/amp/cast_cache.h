#pragma once
// The weight-cast cache (docs/autocast.md): the low-precision copy of an fp32 parameter made
// by the first op that casts it inside an autocast region is reused by every later op there.
#include "mantissa/core/tensor.h"

namespace mantissa::amp::detail {

// A cast of `src` to `target` goes through the cache when the target is the autocast dtype of
// src's device type, src is an fp32 leaf that requires grad, the thread's cache flag is on, and
// grad mode is on (under no_grad nothing is cached or looked up: that is inference, and a copy made
// there would carry no history; PyTorch 2.11 skips the cache in inference mode likewise).
bool cacheable(const Tensor& src, DType target);

// The cached copy of src (made and stored on a miss). Its grad_fn is a cast node with an edge
// to src, so backward through any op that used it reaches the fp32 weight.
Tensor cached_cast(const Tensor& src, DType target);

}  // namespace mantissa::amp::detail
