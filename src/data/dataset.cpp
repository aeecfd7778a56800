// Dataset batching helpers and TensorDataset. Batches are assembled with memcpy of whole
// rows: examples are contiguous, so a batch is a handful of large copies.
#include "mantissa/data/dataset.h"

#include <cstring>

#include "core/dtype_dispatch.h"

namespace mantissa::data {
namespace {
// Copies big batches with several threads; small ones are not worth waking them for.
constexpr size_t kParallelBytes = size_t{1} << 20;
}  // namespace

Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& indices) {
  MANTISSA_CHECK(t.dim() >= 1, "gather_rows", "needs a tensor with at least one dim, got {}",
                 shape_str(t.shape()));
  const Tensor src = t.is_contiguous() ? t : t.detach().contiguous();
  const int64_t rows = src.size(0);
  for (int64_t i : indices)
    MANTISSA_CHECK(i >= 0 && i < rows, "gather_rows", "index {} out of range for {} rows", i, rows);
  Shape shape = src.shape();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor out = empty(shape, src.dtype());
  const size_t row_bytes = rows ? src.nbytes() / static_cast<size_t>(rows) : 0;
  const auto* in = static_cast<const char*>(src.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t n = static_cast<int64_t>(indices.size());
#pragma omp parallel for if (out.nbytes() > kParallelBytes) schedule(static)
  for (int64_t b = 0; b < n; ++b)
    std::memcpy(dst + b * row_bytes, in + indices[b] * row_bytes, row_bytes);
  return out;
}

Tensor stack_examples(const std::vector<Tensor>& tensors) {
  MANTISSA_CHECK(!tensors.empty(), "stack_examples", "nothing to stack");
  const Tensor& first = tensors.front();
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(tensors.size()));
  Tensor out = empty(shape, first.dtype());
  const size_t bytes = first.nbytes();
  auto* dst = static_cast<char*>(out.data_ptr());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MANTISSA_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(), "stack_examples",
                   "example {} is {} {}, example 0 is {} {}", i, t.dtype().name(),
                   shape_str(t.shape()), first.dtype().name(), shape_str(first.shape()));
    const Tensor c = t.is_contiguous() ? t : t.detach().contiguous();
    if (bytes) std::memcpy(dst + i * bytes, c.data_ptr(), bytes);
  }
  return out;
}

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return {stack_examples(inputs), stack_examples(targets)};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) {
  set_tensors(std::move(inputs), std::move(targets));
}

void TensorDataset::set_tensors(Tensor inputs, Tensor targets) {
  const char* where = "TensorDataset";
  MANTISSA_CHECK(inputs.defined() && targets.defined(), where,
                 "inputs and targets must be defined");
  MANTISSA_CHECK(inputs.dim() >= 1 && targets.dim() >= 1, where,
                 "inputs {} and targets {} need a first (example) dim", shape_str(inputs.shape()),
                 shape_str(targets.shape()));
  MANTISSA_CHECK(inputs.size(0) == targets.size(0), where,
                 "inputs {} and targets {} differ in their number of examples (dim 0)",
                 shape_str(inputs.shape()), shape_str(targets.shape()));
  inputs_ = inputs.detach().contiguous();
  targets_ = targets.detach().contiguous();
  size_ = inputs_.size(0);
}

Example TensorDataset::get(int64_t index) const {
  MANTISSA_CHECK(index >= 0 && index < size_, "TensorDataset",
                 "index {} out of range for {} examples", index, size_);
  return {inputs_.select(0, index), targets_.select(0, index)};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  return {gather_rows(inputs_, indices), gather_rows(targets_, indices)};
}

}  // namespace mantissa::data
