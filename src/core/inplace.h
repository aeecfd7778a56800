#pragma once
// Internal, unchecked in-place writes (not part of the public API). Tensor::copy_/fill_/zero_
// refuse, in grad mode, writes whose gradient they cannot record (docs/guide.md, "Autograd",
// in-place writes); the library's own writes go through these instead: an op that fills its output
// piecewise and records its own backward afterwards (cat, attention, the 4-bit products), a
// backward function building a gradient, and the optimizer / scaler / buffer updates that write
// state outside the graph.
#include "mantissa/core/tensor.h"

namespace mantissa::detail {

// dst <- src (broadcasting src, casting its dtype), with no autograd check or record.
Tensor copy_unchecked(const Tensor& dst, const Tensor& src);
// dst <- value, with no autograd check or record.
Tensor fill_unchecked(const Tensor& dst, double value);
inline Tensor zero_unchecked(const Tensor& dst) { return fill_unchecked(dst, 0.0); }

}  // namespace mantissa::detail
