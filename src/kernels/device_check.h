#pragma once
// What every op's GPU branch does first (device_check.cpp): find the one device its tensors
// share, with PyTorch's error when two meet ("expected all tensors to be on the same device,
// but found at least two devices, cuda:0 and cpu"). A 0-dim CPU tensor goes with any device,
// as PyTorch's CPU scalars do, and is copied there by to_device. Plain Tensor code, built in
// every build; the GPU kernels themselves are reached through kernels::gpu_kernels()
// (gpu_kernels.h).
#include <initializer_list>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// True when a defined tensor among them is on a GPU: the op takes its CUDA branch.
inline bool any_cuda(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->is_cuda()) return true;
  return false;
}

// The device of the defined tensors (0-dim CPU tensors adapt to the others).
Device common_device(const char* op, const std::vector<Tensor>& ts);
Device common_device(const char* op, std::initializer_list<const Tensor*> ts);

// t (history-free) on `device`: a 0-dim CPU tensor is copied there, a tensor already there is
// returned as it is.
Tensor to_device(const Tensor& t, const Device& device);

}  // namespace mantissa::kernels::gpu
