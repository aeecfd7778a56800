#pragma once
// (height, width) pairs for the 2-D ops' kernel size, stride, padding and dilation.
#include <array>
#include <cstdint>

namespace mantissa {

using Size2 = std::array<int64_t, 2>;

}  // namespace mantissa
