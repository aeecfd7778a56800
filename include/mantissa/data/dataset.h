#pragma once
// Dataset interface (map-style, like torch.utils.data.Dataset) and TensorDataset, whose
// batches are gathered row by row with memcpy.
#include <cstdint>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::data {

// One example, or a batch of them stacked along a new first dim.
struct Example {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked along a new first dim. The default stacks get()
  // results (every example must have the same shapes and dtypes); TensorDataset overrides
  // it with a direct row gather.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

// Examples are rows (index along dim 0) of `inputs` and `targets`.
class TensorDataset : public Dataset {
 public:
  // Both tensors need the same size of dim 0; they are made contiguous (no copy when they
  // already are) and detached.
  TensorDataset(Tensor inputs, Tensor targets);

  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;  // views of row `index`
  Example get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 protected:
  TensorDataset() = default;
  void set_tensors(Tensor inputs, Tensor targets);

 private:
  Tensor inputs_, targets_;
  int64_t size_ = 0;
};

// Rows `indices` of a tensor (along dim 0), copied into a new contiguous tensor (no autograd).
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& indices);
// Equal-shaped, same-dtype tensors stacked along a new dim 0 into a new tensor (no autograd).
Tensor stack_examples(const std::vector<Tensor>& tensors);

}  // namespace mantissa::data
