// TextWindowDataset: fixed windows of a byte string as (input, next-byte target) pairs.
#include "mantissa/data/text_window_dataset.h"

namespace mantissa::data {

TextWindowDataset::TextWindowDataset(std::string text, int64_t context, int64_t stride)
    : text_(std::move(text)), context_(context), stride_(stride == 0 ? context : stride) {
  MANTISSA_CHECK(context_ > 0, "TextWindowDataset", "context must be positive, got {}", context_);
  MANTISSA_CHECK(stride_ > 0, "TextWindowDataset",
                 "stride must be positive (or 0 for context), got {}", stride);
  const auto n = static_cast<int64_t>(text_.size());
  MANTISSA_CHECK(n >= context_ + 1, "TextWindowDataset",
                 "the text has {} bytes, fewer than one window of context + 1 = {} bytes; use a "
                 "longer text or a shorter context",
                 n, context_ + 1);
  windows_ = (n - 1 - context_) / stride_ + 1;
}

Example TextWindowDataset::get(int64_t index) const {
  Example batch = get_batch({index});
  return {batch.input.reshape({context_}), batch.target.reshape({context_})};
}

Example TextWindowDataset::get_batch(const std::vector<int64_t>& indices) const {
  const auto rows = static_cast<int64_t>(indices.size());
  Tensor x = empty({rows, context_}, kInt64), y = empty({rows, context_}, kInt64);
  int64_t* xp = x.data<int64_t>();
  int64_t* yp = y.data<int64_t>();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text_.data());
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    MANTISSA_CHECK(i >= 0 && i < windows_, "TextWindowDataset",
                   "window {} out of range ({} windows)", i, windows_);
    const unsigned char* w = bytes + i * stride_;
    for (int64_t j = 0; j < context_; ++j) {
      xp[b * context_ + j] = w[j];
      yp[b * context_ + j] = w[j + 1];
    }
  }
  return {x, y};
}

}  // namespace mantissa::data
