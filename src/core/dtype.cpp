#include "mantissa/core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "mantissa/core/error.h"

namespace mantissa {
namespace {

constexpr std::array<std::string_view, DType::kCount> kNames = {
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64",
    "int32",   "uint8",   "int8",    "bool",     "complex64",     "complex128"};

struct Alias {
  std::string_view name;
  DType::Id id;
};

// Short spellings people type on a command line, plus PyTorch's older aliases.
constexpr Alias kAliases[] = {
    {"f64", DType::Id::f64},
    {"double", DType::Id::f64},
    {"fp64", DType::Id::f64},
    {"f32", DType::Id::f32},
    {"float", DType::Id::f32},
    {"fp32", DType::Id::f32},
    {"f16", DType::Id::f16},
    {"half", DType::Id::f16},
    {"fp16", DType::Id::f16},
    {"bf16", DType::Id::bf16},
    {"e4m3", DType::Id::f8_e4m3},
    {"fp8_e4m3", DType::Id::f8_e4m3},
    {"float8_e4m3", DType::Id::f8_e4m3},
    {"e5m2", DType::Id::f8_e5m2},
    {"fp8_e5m2", DType::Id::f8_e5m2},
    {"i64", DType::Id::i64},
    {"long", DType::Id::i64},
    {"i32", DType::Id::i32},
    {"int", DType::Id::i32},
    {"u8", DType::Id::u8},
    {"i8", DType::Id::i8},
    {"b8", DType::Id::b8},
    {"boolean", DType::Id::b8},
    {"cfloat", DType::Id::c64},
    {"c64", DType::Id::c64},
    {"cdouble", DType::Id::c128},
    {"c128", DType::Id::c128},
};

constexpr int rank(DType::Id id) { return static_cast<int>(id); }

}  // namespace

std::string_view DType::name() const { return kNames[static_cast<int>(id_)]; }

std::string to_string(DType d) { return std::string(d.name()); }

DType dtype_from_string(std::string_view s) {
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Accept "torch.float32" as printed by PyTorch.
  std::string_view key = lower;
  if (key.starts_with("torch.")) key.remove_prefix(6);
  for (int i = 0; i < DType::kCount; ++i) {
    if (key == kNames[i]) return DType(static_cast<DType::Id>(i));
  }
  for (const Alias& a : kAliases) {
    if (key == a.name) return DType(a.id);
  }
  std::string valid;
  for (std::string_view n : kNames) {
    if (!valid.empty()) valid += ", ";
    valid += n;
  }
  fail("dtype",
       "unknown dtype '{}'; valid names: {} (aliases: f64, f32, f16, half, bf16, e4m3, "
       "e5m2, i64, long, i32, int, u8, i8, c64, cfloat, c128, cdouble)",
       s, valid);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // PyTorch refuses to guess a common type for float8 (there is no lossless one).
  if (a.is_float8() || b.is_float8()) {
    fail("promote_types",
         "Promotion for Float8 Types is not supported, attempted to promote {} "
         "and {}",
         a.name(), b.name());
  }
  // Complex absorbs real: complex128 when either side carries float64 precision (PyTorch:
  // complex64 with float64 gives complex128).
  if (a.is_complex() || b.is_complex()) {
    const bool wide = a == kComplex128 || b == kComplex128 || a == kFloat64 || b == kFloat64;
    return wide ? kComplex128 : kComplex64;
  }
  if (a.is_bool()) return b;
  if (b.is_bool()) return a;
  if (a.is_floating_point() != b.is_floating_point()) return a.is_floating_point() ? a : b;
  if (a.is_floating_point()) {
    // Neither fp16 nor bf16 holds the other's range and precision; fp32 holds both.
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    // Otherwise the wider one (ids are ordered widest first).
    return rank(a.id()) < rank(b.id()) ? a : b;
  }
  // Both integral. uint8 with int8 needs int16 in PyTorch; we have no int16, so use the next
  // signed type that holds both ranges.
  if ((a == kUInt8 && b == kInt8) || (a == kInt8 && b == kUInt8)) return kInt32;
  // Otherwise the wider signed type (u8 with a wider signed int gives that int).
  return rank(a.id()) < rank(b.id()) ? a : b;
}

}  // namespace mantissa
