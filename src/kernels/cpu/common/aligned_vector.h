#pragma once
// A std::vector whose data starts on a 64-byte boundary. Kernels keep per-column constants and
// maxima in such vectors and read them with 32- and 64-byte vector loads; on malloc's 16-byte
// alignment every other such load straddles two cache lines, and which alignment a call gets
// depends on what the heap held before it, so the same cast ran at different speeds.
#include <cstddef>
#include <new>
#include <vector>

namespace mantissa::kernels {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheLineAllocator() = default;
  template <class U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t n) { ::operator delete(p, n * sizeof(T), kAlign); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace mantissa::kernels
