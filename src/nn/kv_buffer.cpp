#include "mantissa/nn/kv_buffer.h"

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/core/shape.h"

namespace mantissa::nn {
namespace {

// The first buffer holds at least this many positions: a prompt of a few tokens and the tokens
// generated after it fill it before the first doubling.
constexpr int64_t kMinimumCapacity = 64;

}  // namespace

KvBuffer::KvBuffer(const KvBuffer& other)
    : length_(other.length_), max_positions_(other.max_positions_) {
  if (!other.buffer_.defined()) return;
  buffer_ = other.buffer_.clone();
  view_ = buffer_.narrow(2, 0, length_);
}

KvBuffer& KvBuffer::operator=(const KvBuffer& other) {
  if (this != &other) *this = KvBuffer(other);
  return *this;
}

const Tensor& KvBuffer::append(const Tensor& fresh) {
  MANTISSA_CHECK(fresh.defined() && fresh.dim() == 4, "KvBuffer",
                 "appended keys or values must be (batch, heads, positions, head_dim), got {}",
                 fresh.defined() ? shape_str(fresh.shape()) : std::string("an undefined tensor"));
  const int64_t B = fresh.size(0), H = fresh.size(1), T = fresh.size(2), D = fresh.size(3);
  if (buffer_.defined()) {
    MANTISSA_CHECK(B == buffer_.size(0) && H == buffer_.size(1) && D == buffer_.size(3) &&
                       fresh.dtype() == buffer_.dtype() && fresh.device() == buffer_.device(),
                   "KvBuffer", "appended {} {} does not match the cached {} {}",
                   fresh.dtype().name(), shape_str(fresh.shape()), buffer_.dtype().name(),
                   shape_str(view_.shape()));
  }
  const int64_t needed = length_ + T;
  if (needed > capacity()) {
    int64_t grown = std::max(2 * needed, kMinimumCapacity);
    if (max_positions_ > 0) grown = std::max(std::min(grown, max_positions_), needed);
    Tensor larger = empty({B, H, grown, D}, fresh.dtype(), fresh.device());
    if (length_ > 0) larger.narrow(2, 0, length_).copy_(view_);
    buffer_ = std::move(larger);
  }
  buffer_.narrow(2, length_, T).copy_(fresh.detach());
  length_ = needed;
  view_ = buffer_.narrow(2, 0, length_);
  return view_;
}

}  // namespace mantissa::nn
