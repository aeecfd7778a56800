#pragma once
// A 64-byte aligned buffer that grows on demand and is reused: kernels keep one per thread
// (thread_local) for oneDNN scratchpads and reordered operands, so concurrent executions of a
// cached primitive never share temporary memory and no call page-faults a fresh allocation.
#include <cstddef>
#include <cstdlib>

#include "mantissa/core/error.h"

namespace mantissa::kernels {

class GrowableBuffer {
 public:
  GrowableBuffer() = default;
  GrowableBuffer(const GrowableBuffer&) = delete;
  GrowableBuffer& operator=(const GrowableBuffer&) = delete;
  ~GrowableBuffer() { std::free(p_); }

  // At least `bytes` bytes; `op` names the caller in the out-of-memory error.
  void* get(size_t bytes, const char* op) {
    if (bytes > n_) {
      std::free(p_);
      const size_t rounded = (bytes + 63) / 64 * 64;
      p_ = std::aligned_alloc(64, rounded);
      n_ = p_ != nullptr ? rounded : 0;
      MANTISSA_CHECK(p_ != nullptr, op, "out of memory for a {}-byte buffer", bytes);
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace mantissa::kernels
