#pragma once
// Autocast (torch.autocast): inside a region, ops pick their compute dtype from one policy
// table (src/amp/policy.cpp): matmul and linear run in bf16 (or fp16), numerically sensitive
// ops (softmax, losses, exp, log, sum, ...) in fp32, multi-input ops such as cat in the widest
// input dtype, everything else in its input dtype. Casts are autograd nodes, so the gradients
// of fp32 parameters come back fp32. See docs/autocast.md.
//
//   {
//     mantissa::amp::autocast ac;                 // CPU, bfloat16
//     Tensor logits = model.forward(x);           // bf16
//     Tensor loss = cross_entropy(logits, y);     // fp32
//   }                                             // state restored, cast cache cleared
//   loss.backward();                              // backward never applies autocast
//
// All state is per thread, as in PyTorch; new threads start with autocast off.
#include <cstddef>
#include <optional>

#include "mantissa/core/device.h"
#include "mantissa/core/dtype.h"

namespace mantissa::amp {

// RAII region. dtype: std::nullopt means the thread's current autocast dtype for the device
// (bfloat16 on the CPU unless an enclosing region or set_autocast_dtype changed it).
// cache_enabled: std::nullopt means the thread's current cache flag (true by default).
//
// CPU accepts bfloat16 and float16; any other dtype in an enabled region throws
// mantissa::Error naming the supported ones (PyTorch warns and disables instead). A disabled
// region accepts any dtype and leaves the thread's dtype unchanged. DeviceType::kCUDA accepts
// float16 (its default) and bfloat16 where the GPU supports it (cuda::is_bf16_supported());
// without a usable GPU the region warns once on stderr and behaves as enabled = false, like
// PyTorch when CUDA is unavailable. Each region casts only the tensors of its device type:
// CUDA autocast applies to ops whose inputs are on a GPU, CPU autocast to ops on CPU tensors,
// with the same policy table (src/amp/policy.cpp).
//
// Entering saves the thread's enabled flag and dtype for the device and its cache flag, then
// counts one more nesting level (disabled regions count too). Leaving restores them, also
// when an exception leaves the region, and clears the cast cache when the outermost region
// exits (so cached low-precision weights never outlive the region). A region closed while one
// opened inside it is still open (held by unique_ptr or optional and reset in the wrong order)
// warns once and hands its saved state to the regions above, so the thread ends up as if they
// had closed innermost first.
class autocast {
 public:
  explicit autocast(DeviceType device = DeviceType::kCPU, std::optional<DType> dtype = std::nullopt,
                    bool enabled = true, std::optional<bool> cache_enabled = std::nullopt);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

  bool enabled() const { return enabled_; }
  DType dtype() const { return dtype_; }

 private:
  DeviceType device_;
  bool enabled_;
  DType dtype_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

// ---- per-thread state (torch.is_autocast_enabled(device), torch.get_autocast_dtype, ...) ----
bool is_autocast_enabled(DeviceType device = DeviceType::kCPU);
void set_autocast_enabled(DeviceType device, bool enabled);
// The dtype lower-precision ops use: bfloat16 by default on the CPU, float16 for CUDA.
DType get_autocast_dtype(DeviceType device = DeviceType::kCPU);
// CPU: bfloat16 or float16, anything else throws mantissa::Error.
void set_autocast_dtype(DeviceType device, DType dtype);
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
// Number of autocast regions this thread is inside (disabled ones included).
int autocast_nesting();

// ---- the weight-cast cache (process-wide, like PyTorch 2.x) ----
// Low-precision copies of fp32 leaf tensors that require grad (the parameters), made inside
// an autocast region with grad mode on, so a weight used by several ops is cast once. Each
// copy is the output of a recorded cast node: backward through it reaches the fp32 weight.
void clear_autocast_cache();
size_t autocast_cache_size();

}  // namespace mantissa::amp
