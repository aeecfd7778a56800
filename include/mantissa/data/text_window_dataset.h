#pragma once
// TextWindowDataset: a byte string cut into fixed windows for next-byte prediction. Example i
// is the window of context + 1 bytes starting at i * stride: input its first `context` bytes,
// target the same window shifted by one byte (both int64, shape (context)).
//
// The windows are a fixed tiling (stride = context by default: every byte is a target exactly
// once per epoch, apart from the last partial window). Randomness comes from the DataLoader,
// which shuffles the windows with a permutation drawn from seed + epoch: each epoch sees the
// same windows in another order, reproducibly, and a resumed run finds its place in the epoch
// without replaying anything. With stride = context the validation windows are exactly those
// of TextCorpus::sequential_batches.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/data/dataset.h"

namespace mantissa::data {

class TextWindowDataset : public Dataset {
 public:
  // stride 0 means stride = context. Throws when context or stride is not positive, and when
  // the text is shorter than one window (context + 1 bytes), naming both lengths.
  TextWindowDataset(std::string text, int64_t context, int64_t stride = 0);

  int64_t size() const override { return windows_; }
  Example get(int64_t index) const override;
  // Fills the (batch, context) input and target tensors straight from the bytes.
  Example get_batch(const std::vector<int64_t>& indices) const override;

  int64_t context() const { return context_; }
  int64_t stride() const { return stride_; }
  // Bytes of text the dataset reads from.
  int64_t text_bytes() const { return static_cast<int64_t>(text_.size()); }

 private:
  std::string text_;
  int64_t context_, stride_, windows_;
};

}  // namespace mantissa::data
