#pragma once
// Where a tensor lives: the CPU, or a CUDA GPU when the CUDA backend is built and a GPU is
// present (mantissa/core/cuda.h, docs/cuda.md).
#include <cstdint>
#include <string>
#include <string_view>

namespace mantissa {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const {
    return type == DeviceType::kCPU ? "cpu" : "cuda:" + std::to_string(index);
  }
};

inline const Device kCPU{};
// The GPU of that index (as torch.device("cuda", index)).
inline Device cuda_device(int index = 0) { return Device{DeviceType::kCUDA, index}; }

// "cpu", "cuda", "cuda:1" or "gpu" (the first GPU), as torch.device accepts them; anything
// else is an Error listing the accepted spellings. Whether the GPU exists is not checked here.
Device parse_device(std::string_view text);

}  // namespace mantissa
