#include "whole_number_options.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string>

#include "mantissa/core/untrusted_text.h"

namespace mantissa::app {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The example the messages give, as command_line_errors.cpp's reworded_conversion gives it.
std::string example(const CLI::Option* op) {
  return op->get_default_str().empty()
             ? std::string("2")
             : fmt::format("{}, the default", escape_untrusted(op->get_default_str()));
}

// The digits [first, last) of `value` as a T: out of range is an error; in range, `value` is
// rewritten in canonical decimal (no leading zeros) for CLI11's base-0 conversion.
template <typename T>
std::string read_decimal(std::string& value, const char* first, const char* last,
                         const CLI::Option* op) {
  T n = 0;
  const auto [end, ec] = std::from_chars(first, last, n);
  if (ec == std::errc::result_out_of_range) {
    return fmt::format("'{}' is out of range (expected a whole number such as {})",
                       escape_untrusted(value), example(op));
  }
  if (ec == std::errc() && end == last) value = std::to_string(n);
  return {};
}

std::string check(std::string& value, const CLI::Option* op, bool is_unsigned) {
  const size_t sign = !value.empty() && (value[0] == '+' || value[0] == '-') ? 1 : 0;
  const std::string digits = value.substr(sign);
  if (digits.empty() || digits[0] < '0' || digits[0] > '9') return {};  // CLI11's to refuse
  const std::string lower = CLI::detail::to_lower(digits);
  if (starts_with(lower, "0x") || starts_with(lower, "0b") || starts_with(lower, "0o")) {
    return fmt::format("'{}' is not an integer (expected a whole number in decimal such as {})",
                       escape_untrusted(value), example(op));
  }
  if (digits.find_first_not_of("0123456789") != std::string::npos) return {};  // "1e3", "2.5"
  const char* first = value.data() + (value[0] == '+' ? 1 : 0);
  const char* last = value.data() + value.size();
  if (is_unsigned) {
    if (value[0] == '-') return {};  // the option's own check, or CLI11, says "negative"
    return read_decimal<uint64_t>(value, first, last, op);
  }
  return read_decimal<int64_t>(value, first, last, op);
}

}  // namespace

void read_whole_numbers_in_decimal(CLI::App& app) {
  for (CLI::Option* op : app.get_options()) {
    const std::string type = op->get_type_name();
    const bool is_unsigned = starts_with(type, "UINT");
    if (!is_unsigned && !starts_with(type, "INT")) continue;
    op->transform(CLI::Validator(
        [op, is_unsigned](std::string& value) { return check(value, op, is_unsigned); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands({})) read_whole_numbers_in_decimal(*sub);
}

}  // namespace mantissa::app
