#pragma once
// Internal: when a cast stores its codes past the caches (non-temporal stores). Codes beyond
// what the caches hold are fetched from memory by their reader anyway, so writing them through
// the caches only evicts the source being read; smaller ones stay in cache for the GEMM that
// reads them next. One threshold for every cast that streams: the FP8 casts (fp8/fp8_cast.cpp,
// fp8/rowwise_cast_avx2.cpp) and the MX row casts (mx/mx_cast.cpp).
#include <cstdint>

namespace mantissa::kernels {

// Casts of at least this many code bytes (8 MiB, a quarter of the L3) stream them.
constexpr int64_t kStreamCodesFrom = int64_t{8} << 20;

}  // namespace mantissa::kernels
