#pragma once
// DType: a tiny value type naming an element type (MLX-style). Sizes and names are fixed by
// the issue; promotion follows PyTorch's c10 table (see promote_types in dtype.cpp).
#include <cstdint>
#include <string>
#include <string_view>

namespace mantissa {

class DType {
 public:
  // Real dtypes first; the complex ones (docs/complex.md) come last, so the real ranges below
  // and every table indexed by a real id stay as they were.
  enum class Id : uint8_t {
    f64,
    f32,
    f16,
    bf16,
    f8_e4m3,
    f8_e5m2,
    i64,
    i32,
    u8,
    i8,
    b8,
    c64,
    c128
  };
  static constexpr int kCount = 13;
  static constexpr int kRealCount = 11;  // ids below this are real

  constexpr DType() = default;
  constexpr DType(Id id) : id_(id) {}  // NOLINT: implicit so `DType d = DType::Id::f32` reads well

  constexpr Id id() const { return id_; }
  constexpr size_t itemsize() const {
    constexpr size_t sizes[kCount] = {8, 4, 2, 2, 1, 1, 8, 4, 1, 1, 1, 8, 16};
    return sizes[static_cast<int>(id_)];
  }
  // PyTorch's spelling: "float32", "bfloat16", "float8_e4m3fn", ...
  std::string_view name() const;
  constexpr bool is_floating_point() const { return static_cast<int>(id_) <= 5; }
  constexpr bool is_float8() const { return id_ == Id::f8_e4m3 || id_ == Id::f8_e5m2; }
  // fp16/bf16/fp8: stored narrow, computed in fp32 registers.
  constexpr bool is_reduced_float() const { return id_ >= Id::f16 && id_ <= Id::f8_e5m2; }
  constexpr bool is_integral(bool include_bool = false) const {
    return (id_ >= Id::i64 && id_ <= Id::i8) || (include_bool && id_ == Id::b8);
  }
  constexpr bool is_bool() const { return id_ == Id::b8; }
  // complex64 (two float32) or complex128 (two float64), as std::complex stores them.
  constexpr bool is_complex() const { return id_ == Id::c64 || id_ == Id::c128; }

  friend constexpr bool operator==(DType a, DType b) { return a.id_ == b.id_; }
  friend constexpr bool operator!=(DType a, DType b) { return a.id_ != b.id_; }

 private:
  Id id_ = Id::f32;
};

inline constexpr DType kFloat64{DType::Id::f64};
inline constexpr DType kFloat32{DType::Id::f32};
inline constexpr DType kFloat16{DType::Id::f16};
inline constexpr DType kBFloat16{DType::Id::bf16};
inline constexpr DType kFloat8_e4m3fn{DType::Id::f8_e4m3};
inline constexpr DType kFloat8_e5m2{DType::Id::f8_e5m2};
inline constexpr DType kInt64{DType::Id::i64};
inline constexpr DType kInt32{DType::Id::i32};
inline constexpr DType kUInt8{DType::Id::u8};
inline constexpr DType kInt8{DType::Id::i8};
inline constexpr DType kBool{DType::Id::b8};
inline constexpr DType kComplex64{DType::Id::c64};
inline constexpr DType kComplex128{DType::Id::c128};

// The default dtype for floating tensors created without one (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = kFloat32;

// PyTorch's promote_types: the smallest dtype both a and b convert to without losing
// range or category. Throws for float8 mixed with another dtype (as PyTorch does).
DType promote_types(DType a, DType b);

// Parses "float32", "f32", "bf16", "bfloat16", "half", ... Throws with the valid names.
DType dtype_from_string(std::string_view s);

std::string to_string(DType d);

}  // namespace mantissa
