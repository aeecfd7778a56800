#pragma once
// Dtype dispatch: calls fn with a TypeTag<T> for the tensor's element type, so one templated
// loop serves every dtype. Reduced floats (Half, BFloat16) are loaded into fp32 registers via
// acc_t and rounded once when stored.
#include <string_view>
#include <type_traits>
#include <utility>

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

// Every real dtype, including fp8, integers and bool (complex dtypes fail with a clear error). The
// one switch over dtypes: the narrower dispatches below filter its types at compile time, so fn is
// never instantiated for a type they reject.
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
    case DType::Id::c64:
    case DType::Id::c128:
      // Complex tensors take their own paths (core/complex_dispatch.h, docs/complex.md); an
      // op without one says so instead of reading pairs of floats as reals.
      fail(where,
           "not supported for complex tensors (dtype {}); see docs/complex.md for the "
           "ops that are",
           dt.name());
  }
  fail(where, "unknown dtype");
}

// Float8 is a storage format (as in PyTorch, which has no arithmetic on it).
template <typename T>
using IsFloat8 = std::disjunction<std::is_same<T, Float8E4M3>, std::is_same<T, Float8E5M2>>;

// The floats ops compute in: f64, f32, f16, bf16.
template <typename T>
using IsComputeFloat = std::disjunction<std::is_same<T, double>, std::is_same<T, float>,
                                        std::is_same<T, Half>, std::is_same<T, BFloat16>>;

// Calls fn for the dtypes where Accept<T> holds; any other dtype fails with `message`
// (formatted with the dtype's name, checked at compile time). fn is instantiated only for accepted
// types, so its body may use arithmetic that a rejected type (fp8) lacks.
template <template <typename> class Accept, typename F>
decltype(auto) dispatch_if(DType dt, const char* where,
                           fmt::format_string<std::string_view> message, F&& fn) {
  using R = decltype(fn(TypeTag<float>{}));
  return dispatch_all(dt, where, [&](auto tag) -> R {
    if constexpr (Accept<typename decltype(tag)::type>::value) {
      return fn(tag);
    } else {
      fail(where, message, std::string_view(dt.name()));
    }
  });
}

// f64, f32, f16, bf16: the dtypes every differentiable op computes in.
template <typename F>
decltype(auto) dispatch_floating(DType dt, const char* where, F&& fn) {
  return dispatch_if<IsComputeFloat>(
      dt, where, "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
      std::forward<F>(fn));
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
