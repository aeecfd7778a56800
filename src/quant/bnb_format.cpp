// bitsandbytes' packed quant state: writing it byte for byte as Python does, and reading it
// back with checks that name what is wrong.
#include "mantissa/quant/bnb_format.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/formats/format_table.h"

namespace mantissa::quant {
namespace {

constexpr const char* kWhere = "bitsandbytes 4-bit state";

std::string dtype_word(DType d) {  // str(torch.float32).strip("torch.")
  if (d == kFloat32) return "float32";
  if (d == kBFloat16) return "bfloat16";
  if (d == kFloat16) return "float16";
  fail(kWhere, "bitsandbytes stores 4-bit weights of float32, bfloat16 or float16, not {}",
       d.name());
}

DType dtype_from_word(const std::string& s) {
  if (s == "float32") return kFloat32;
  if (s == "bfloat16") return kBFloat16;
  if (s == "float16") return kFloat16;
  fail(kWhere, "quant state dtype \"{}\" is not float32, bfloat16 or float16", s);
}

// The 4-bit rows of the format table (nf4, fp4): the formats whose weights take this layout.
std::vector<FormatId> four_bit_formats() {
  std::vector<FormatId> out;
  for (const formats::FormatRow& row : formats::format_table())
    if (row.element_bits == 4 && row.scale == formats::ScaleFormat::kFp32PerBlock)
      out.push_back(row.id);
  return out;
}

bool is_four_bit(FormatId f) {
  return formats::has_layout(f, 4, formats::ScaleFormat::kFp32PerBlock);
}

const std::array<float, 16>& table_of(FormatId f) {
  return kernels::quant::four_bit_codebook(f).values;
}

}  // namespace

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";  // json.dumps spelling
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // shortest round-trip digits: "-d.ddde±XX"
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp10 = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int decpt = exp10 + 1;  // position of the decimal point after the first digit
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." +
            digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    out += fmt::format("e{}{:02d}", x < 0 ? '-' : '+', std::abs(x));
  }
  return neg ? "-" + out : out;
}

std::string quant_state_key(FormatId f) {
  return "quant_state.bitsandbytes__" + std::string(formats::format_name(f));
}

bool is_quant_state_key(std::string_view name) {
  for (FormatId f : four_bit_formats()) {
    const std::string key = "." + quant_state_key(f);
    if (name.size() > key.size() && name.substr(name.size() - key.size()) == key) return true;
  }
  return false;
}

std::string quant_state_json(const QuantizedTensor& q) {
  std::string shape = "[";
  for (size_t i = 0; i < q.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(q.shape[i]);
  shape += "]";
  std::string s =
      fmt::format(R"({{"quant_type": "{}", "blocksize": {}, "dtype": "{}", "shape": {})",
                  formats::format_name(q.format), q.blocksize, dtype_word(q.dtype), shape);
  if (q.has_nested) {
    s += fmt::format(R"(, "nested_blocksize": {}, "nested_dtype": "float32", "nested_offset": {})",
                     q.nested.blocksize, python_float_repr(static_cast<double>(q.nested.offset)));
  }
  return s + "}";
}

NamedTensorList to_bnb_tensors(const std::string& prefix, const QuantizedTensor& q) {
  MANTISSA_CHECK(is_four_bit(q.format), kWhere, "only 4-bit tensors have this layout, got {}",
                 formats::format_name(q.format));
  NamedTensorList out;
  out.emplace_back(prefix, q.data);
  out.emplace_back(prefix + ".absmax", q.absmax);
  out.emplace_back(prefix + ".quant_map", q.code);
  if (q.has_nested) {
    out.emplace_back(prefix + ".nested_absmax", q.nested.absmax);
    out.emplace_back(prefix + ".nested_quant_map", q.nested.code);
  }
  const std::string js = quant_state_json(q);
  out.emplace_back(prefix + "." + quant_state_key(q.format),
                   from_buffer(js.data(), kUInt8, {static_cast<int64_t>(js.size())}));
  return out;
}

QuantizedTensor from_bnb_tensors(const std::string& prefix,
                                 const std::function<Tensor(const std::string&)>& lookup) {
  auto need = [&](const std::string& suffix, DType dtype) {
    const std::string key = suffix.empty() ? prefix : prefix + "." + suffix;
    Tensor t = lookup(key);
    MANTISSA_CHECK(t.defined(), kWhere, "missing \"{}\"", key);
    MANTISSA_CHECK(t.dtype() == dtype, kWhere, "\"{}\" has dtype {}, expected {}", key,
                   t.dtype().name(), dtype.name());
    return t.contiguous();
  };
  // Exactly one quant state entry names the format.
  Tensor state;
  FormatId format = FormatId::kNf4;
  for (FormatId f : four_bit_formats()) {
    Tensor t = lookup(prefix + "." + quant_state_key(f));
    if (!t.defined()) continue;
    MANTISSA_CHECK(!state.defined(), kWhere, "\"{}\" has both an nf4 and an fp4 quant state",
                   prefix);
    state = t;
    format = f;
  }
  MANTISSA_CHECK(state.defined(), kWhere,
                 "missing \"{0}.quant_state.bitsandbytes__nf4\" (or __fp4): \"{0}\" is not a "
                 "bitsandbytes 4-bit weight",
                 prefix);
  MANTISSA_CHECK(state.dtype() == kUInt8 && state.dim() == 1, kWhere,
                 "\"{}\" must be a 1-D uint8 tensor of JSON bytes",
                 prefix + "." + quant_state_key(format));
  const Tensor sc = state.contiguous();
  const std::string text(static_cast<const char*>(sc.data_ptr()), static_cast<size_t>(sc.numel()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(kWhere, "quant state of \"{}\" is not valid JSON ({}): {}", prefix, e.what(), text);
  }
  QuantizedTensor q;
  q.format = format;
  try {
    MANTISSA_CHECK(j.at("quant_type").get<std::string>() == formats::format_name(format), kWhere,
                   "quant state of \"{}\" says quant_type {} but its key says {}", prefix,
                   j.at("quant_type").dump(), formats::format_name(format));
    q.blocksize = j.at("blocksize").get<int64_t>();
    q.dtype = dtype_from_word(j.at("dtype").get<std::string>());
    for (const auto& d : j.at("shape")) q.shape.push_back(d.get<int64_t>());
    q.has_nested = j.contains("nested_offset");
    if (q.has_nested) {
      q.nested.blocksize = j.at("nested_blocksize").get<int64_t>();
      q.nested.offset = static_cast<float>(j.at("nested_offset").get<double>());
      MANTISSA_CHECK(j.at("nested_dtype").get<std::string>() == "float32", kWhere,
                     "nested_dtype must be float32");
    }
  } catch (const nlohmann::json::exception& e) {
    fail(kWhere, "quant state of \"{}\" lacks a field or has a wrong type ({}): {}", prefix,
         e.what(), text);
  }
  const int64_t b = q.blocksize;
  MANTISSA_CHECK(b >= 32 && b <= 4096 && (b & (b - 1)) == 0, kWhere,
                 "quant state of \"{}\" has blocksize {} (expected a power of two 32..4096)",
                 prefix, b);
  for (int64_t d : q.shape)
    MANTISSA_CHECK(d >= 0, kWhere, "quant state of \"{}\" has a negative dimension", prefix);
  const int64_t n = q.numel(), nblocks = (n + b - 1) / b;
  q.data = need("", kUInt8);
  MANTISSA_CHECK(q.data.numel() == (n + 1) / 2, kWhere,
                 "\"{}\" holds {} bytes but shape {} needs {}", prefix, q.data.numel(),
                 shape_str(q.shape), (n + 1) / 2);
  q.absmax = need("absmax", q.has_nested ? kUInt8 : kFloat32);
  MANTISSA_CHECK(q.absmax.numel() == nblocks, kWhere,
                 "\"{}.absmax\" has {} entries, expected {} blocks", prefix, q.absmax.numel(),
                 nblocks);
  q.code = need("quant_map", kFloat32);
  const auto& table = table_of(format);
  MANTISSA_CHECK(
      q.code.numel() == 16 && std::memcmp(q.code.data_ptr(), table.data(), sizeof(float) * 16) == 0,
      kWhere, "\"{}.quant_map\" is not bitsandbytes' {} table", prefix,
      formats::format_name(format));
  if (q.has_nested) {
    MANTISSA_CHECK(q.nested.blocksize > 0, kWhere, "nested_blocksize must be positive");
    q.nested.absmax = need("nested_absmax", kFloat32);
    MANTISSA_CHECK(
        q.nested.absmax.numel() == (nblocks + q.nested.blocksize - 1) / q.nested.blocksize, kWhere,
        "\"{}.nested_absmax\" has {} entries, expected {}", prefix, q.nested.absmax.numel(),
        (nblocks + q.nested.blocksize - 1) / q.nested.blocksize);
    q.nested.code = need("nested_quant_map", kFloat32);
    MANTISSA_CHECK(q.nested.code.numel() == 256, kWhere,
                   "\"{}.nested_quant_map\" has {} entries, expected 256", prefix,
                   q.nested.code.numel());
  }
  return q;
}

}  // namespace mantissa::quant
