#pragma once
// Dtype dispatch: calls fn with a TypeTag<T> for the tensor's element type, so one templated
// loop serves every dtype. Reduced floats (Half, BFloat16) are loaded into fp32 registers via
// acc_t and rounded once when stored.
#include <type_traits>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels {

template <typename T>
struct TypeTag {
  using type = T;
};

// The type arithmetic happens in: double for f64, float for every narrower float.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_integral_v<T>, T, float>>;

// f64, f32, f16, bf16: the dtypes every differentiable op computes in.
template <typename F>
decltype(auto) dispatch_floating(DType dt, const char* where, F&& fn) {
  switch (dt.id()) {
    case DType::Id::f64:
      return fn(TypeTag<double>{});
    case DType::Id::f32:
      return fn(TypeTag<float>{});
    case DType::Id::f16:
      return fn(TypeTag<Half>{});
    case DType::Id::bf16:
      return fn(TypeTag<BFloat16>{});
    default:
      fail(where, "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
           dt.name());
  }
}

// Every dtype, including fp8, integers and bool.
template <typename F>
decltype(auto) dispatch_all(DType dt, const char* where, F&& fn) {
  switch (dt.id()) {
    case DType::Id::f64:
      return fn(TypeTag<double>{});
    case DType::Id::f32:
      return fn(TypeTag<float>{});
    case DType::Id::f16:
      return fn(TypeTag<Half>{});
    case DType::Id::bf16:
      return fn(TypeTag<BFloat16>{});
    case DType::Id::f8_e4m3:
      return fn(TypeTag<Float8E4M3>{});
    case DType::Id::f8_e5m2:
      return fn(TypeTag<Float8E5M2>{});
    case DType::Id::i64:
      return fn(TypeTag<int64_t>{});
    case DType::Id::i32:
      return fn(TypeTag<int32_t>{});
    case DType::Id::u8:
      return fn(TypeTag<uint8_t>{});
    case DType::Id::i8:
      return fn(TypeTag<int8_t>{});
    case DType::Id::b8:
      return fn(TypeTag<bool>{});
  }
  fail(where, "unknown dtype");
}

// Loads an element into its arithmetic type, and stores back with one rounding.
template <typename T>
inline acc_t<T> load(const T& v) {
  return static_cast<acc_t<T>>(v);
}
template <typename T, typename A>
inline T store(A v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Threads are worth starting only above this many elements (elementwise work).
inline constexpr int64_t kParallelGrain = 1 << 15;

}  // namespace mantissa::kernels
