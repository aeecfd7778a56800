#pragma once
// A bounded LRU of oneDNN primitives (or anything built once per shape), keyed by a vector of
// integers (shapes, strides, dtypes, pass). Shared by the matmul and convolution kernels.
// Creation happens under the lock: it is rare (once per shape) and keeps two threads from
// building the same primitive.
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mantissa::kernels {

using PrimitiveKey = std::vector<int64_t>;

struct PrimitiveKeyHash {
  size_t operator()(const PrimitiveKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

template <typename Entry>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : capacity_(capacity) {}

  // The cached entry for key, built with make() on a miss (evicting the least recently used).
  template <typename Make>
  Entry get(const PrimitiveKey& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    lru_.emplace_front(key, make());
    map_.emplace(key, lru_.begin());
    if (lru_.size() > capacity_) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
  }

 private:
  using Item = std::pair<PrimitiveKey, Entry>;
  size_t capacity_;
  std::mutex mu_;
  std::list<Item> lru_;  // most recently used first
  std::unordered_map<PrimitiveKey, typename std::list<Item>::iterator, PrimitiveKeyHash> map_;
};

}  // namespace mantissa::kernels
