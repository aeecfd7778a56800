#pragma once
// Storage: one counted allocation shared by a tensor and all of its views.
#include <cstddef>
#include <memory>

#include "mantissa/core/allocator.h"

namespace mantissa {

class Storage {
 public:
  explicit Storage(size_t nbytes)
      : data_(nbytes ? allocate_bytes(nbytes) : nullptr), nbytes_(nbytes) {}
  ~Storage() { free_bytes(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  void* data_;
  size_t nbytes_;
};

}  // namespace mantissa
