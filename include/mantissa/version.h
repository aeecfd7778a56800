#pragma once
namespace mantissa {
// The library version, e.g. "0.1.0".
const char* version();
}  // namespace mantissa
