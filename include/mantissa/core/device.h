#pragma once
// Where a tensor lives. Only the CPU exists today; the CUDA backend will slot in behind the
// same value type.
#include <string>

namespace mantissa {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
  std::string str() const {
    return type == DeviceType::kCPU ? "cpu" : "cuda:" + std::to_string(index);
  }
};

inline const Device kCPU{};

}  // namespace mantissa
