// safetensors dtype strings <-> mantissa DTypes.
#include <array>
#include <string>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/safetensors.h"

namespace mantissa::io {
namespace {

struct Entry {
  std::string_view name;
  DType dtype;
};

// The spellings of the safetensors specification for the dtypes mantissa has.
constexpr std::array<Entry, DType::kRealCount> kTable = {{
    {"F64", kFloat64},
    {"F32", kFloat32},
    {"F16", kFloat16},
    {"BF16", kBFloat16},
    {"F8_E4M3", kFloat8_e4m3fn},
    {"F8_E5M2", kFloat8_e5m2},
    {"I64", kInt64},
    {"I32", kInt32},
    {"I8", kInt8},
    {"U8", kUInt8},
    {"BOOL", kBool},
}};

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  for (const Entry& e : kTable)
    if (e.dtype == dtype) return e.name;
  fail("safetensors", "dtype {} has no safetensors name{}", dtype.name(),
       dtype.is_complex() ? " (save real() and imag() as two tensors)" : "");
}

DType dtype_from_safetensors(std::string_view name) {
  for (const Entry& e : kTable)
    if (e.name == name) return e.dtype;
  std::string valid;
  for (const Entry& e : kTable) valid += (valid.empty() ? "" : ", ") + std::string(e.name);
  fail("safetensors", "unknown dtype {} (mantissa reads: {})", quote_untrusted(name), valid);
}

}  // namespace mantissa::io
