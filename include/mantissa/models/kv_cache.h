#pragma once
// The key/value cache of incremental decoding: per decoder layer, the keys and values (after
// rotary embeddings) of every position seen so far, (batch, kv_heads, positions, head_dim).
// CausalLM::forward(tokens, cache) appends the new positions' keys and values to each layer
// and attends over the whole cache, so a step costs one token's forward instead of the prefix's.
#include <cstdint>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::models {

struct KvCache {
  std::vector<Tensor> keys;    // one per layer; undefined before the first forward
  std::vector<Tensor> values;  // same shapes as keys

  // Positions cached (0 when empty).
  int64_t length() const {
    return keys.empty() || !keys.front().defined() ? 0 : keys.front().size(2);
  }
  void clear() {
    keys.clear();
    values.clear();
  }
};

}  // namespace mantissa::models
