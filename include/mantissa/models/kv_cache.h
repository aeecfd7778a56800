#pragma once
// The key/value cache of incremental decoding: per decoder layer, the keys and values (after
// rotary embeddings) of every position seen so far, (batch, kv_heads, positions, head_dim).
// CausalLM::forward(tokens, cache) appends the new positions' keys and values to each layer, in
// place (nn::KvBuffer), and attends over the whole cache, so a step costs one token's forward
// instead of the prefix's.
#include <cstdint>
#include <vector>

#include "mantissa/nn/kv_buffer.h"

namespace mantissa::models {

struct KvCache {
  std::vector<nn::KvBuffer> keys;    // one per layer; empty before the first forward
  std::vector<nn::KvBuffer> values;  // same shapes as keys

  // Positions cached (0 when empty).
  int64_t length() const { return keys.empty() ? 0 : keys.front().length(); }
  void clear() {
    keys.clear();
    values.clear();
  }
};

}  // namespace mantissa::models
