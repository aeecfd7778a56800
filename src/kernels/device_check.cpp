// The device checks of the ops' GPU branches (device_check.h): plain Tensor code, in every
// build.
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

namespace {
Device common_of(const char* op, const std::vector<const Tensor*>& ts) {
  const Tensor* first = nullptr;  // the first tensor that fixes the device
  for (const Tensor* t : ts) {
    if (!t->defined() || (t->dim() == 0 && t->device().is_cpu())) continue;
    if (first == nullptr) {
      first = t;
    } else if (t->device() != first->device()) {
      fail(op,
           "expected all tensors to be on the same device, but found at least two devices, {} "
           "and {}",
           first->device().str(), t->device().str());
    }
  }
  if (first != nullptr) return first->device();
  for (const Tensor* t : ts)  // only 0-dim tensors: any GPU among them decides
    if (t->defined() && t->is_cuda()) return t->device();
  return kCPU;
}
}  // namespace

Device common_device(const char* op, const std::vector<Tensor>& ts) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : ts) p.push_back(&t);
  return common_of(op, p);
}

Device common_device(const char* op, std::initializer_list<const Tensor*> ts) {
  return common_of(op, std::vector<const Tensor*>(ts));
}

Tensor to_device(const Tensor& t, const Device& device) {
  if (t.device() == device) return t.detach();
  return t.detach().to(device);
}

}  // namespace mantissa::kernels::gpu
