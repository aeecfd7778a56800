#pragma once
// One decoder layer's cached keys or values for incremental decoding: (batch, heads, positions,
// head_dim) held in a buffer with spare positions, so that appending a token's keys writes them
// in place instead of copying every cached position (cat does, once per generated token). The
// buffer doubles when full (never past max_positions when that is given), so n appended
// positions cost O(n) copies in all.
#include <cstdint>

#include "mantissa/core/tensor.h"

namespace mantissa::nn {

class KvBuffer {
 public:
  KvBuffer() = default;
  // max_positions > 0 bounds the buffer's growth (the model's context); 0 lets it double freely.
  explicit KvBuffer(int64_t max_positions) : max_positions_(max_positions) {}
  // A copy owns its own buffer: two caches forked from one (beam search, a retried step) append
  // without writing into each other's spare positions.
  KvBuffer(const KvBuffer& other);
  KvBuffer& operator=(const KvBuffer& other);
  KvBuffer(KvBuffer&&) noexcept = default;
  KvBuffer& operator=(KvBuffer&&) noexcept = default;

  // Appends fresh (batch, heads, T, head_dim) after the cached positions and returns the view of
  // all of them, (batch, heads, length(), head_dim), detached. fresh's batch, heads, head_dim,
  // dtype and device must equal the cached ones.
  const Tensor& append(const Tensor& fresh);

  // The cached positions (undefined before the first append).
  const Tensor& view() const { return view_; }
  int64_t length() const { return length_; }
  // Positions the buffer holds before it must grow.
  int64_t capacity() const { return buffer_.defined() ? buffer_.size(2) : 0; }
  bool defined() const { return view_.defined(); }

 private:
  Tensor buffer_;  // (batch, heads, capacity, head_dim), contiguous
  Tensor view_;    // buffer_'s first length_ positions
  int64_t length_ = 0;
  int64_t max_positions_ = 0;
};

}  // namespace mantissa::nn
