// Empty values and non-decimal numbers refused before CLI11 converts them (flag_value_checks.h).
#include "flag_value_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "command_line_errors.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::app {
namespace {

bool has_type(const CLI::Option& op, const char* prefix) {
  return op.get_type_name().rfind(prefix, 0) == 0;
}

// The flag's long name ("--lr"), for the messages.
std::string flag_name(const CLI::Option& op) {
  return op.get_lnames().empty() ? op.get_name() : "--" + op.get_lnames().front();
}

std::string empty_value_error(const CLI::Option& op) {
  return fmt::format("the value is empty (an unset shell variable?); give {}{}",
                     expected_value_text(op),
                     op.get_required() ? "" : fmt::format(", or leave {} out", flag_name(op)));
}

std::string float_value_error(const std::string& value, const CLI::Option& op) {
  if (value.empty()) return {};
  // A decimal number past double's range (1e400, thousands of digits) reads as inf.
  if (is_decimal_number(value) && std::isfinite(std::strtod(value.c_str(), nullptr))) return {};
  if (is_decimal_number(value))
    return fmt::format("'{}' is out of range (expected {})", escape_untrusted(value, 40),
                       expected_value_text(op));
  return fmt::format(
      "'{}' is not a number (expected {}); write it in decimal, such as 0.001 or 1e-3",
      escape_untrusted(value), expected_value_text(op));
}

}  // namespace

bool is_float_option(const CLI::Option& op) { return has_type(op, "FLOAT"); }

bool is_number_option(const CLI::Option& op) {
  return is_float_option(op) || has_type(op, "INT") || has_type(op, "UINT");
}

void check_flag_values(CLI::App& app, const std::vector<std::string>& empty_allowed) {
  for (CLI::Option* op : app.get_options()) {
    if (op->get_expected_min() == 0) continue;  // a switch: no value to check
    if (is_float_option(*op)) {
      op->transform(
          CLI::Validator([op](std::string& value) { return float_value_error(value, *op); }, ""));
    }
    if (std::find(empty_allowed.begin(), empty_allowed.end(), flag_name(*op)) !=
        empty_allowed.end())
      continue;
    // Added last, so it runs first (CLI11 runs the latest transform first).
    op->transform(CLI::Validator(
        [op](std::string& value) { return value.empty() ? empty_value_error(*op) : std::string(); },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands({})) check_flag_values(*sub, empty_allowed);
}

bool is_decimal_number(const std::string& text) {
  size_t i = 0;
  const size_t n = text.size();
  const auto digits = [&] {
    const size_t start = i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i - start;
  };
  if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
  size_t mantissa_digits = digits();
  if (i < n && text[i] == '.') {
    ++i;
    mantissa_digits += digits();
  }
  if (mantissa_digits == 0) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == n;
}

std::string expected_value_text(const CLI::Option& op) {
  const std::string def = op.get_default_str();
  const std::string such_as =
      def.empty() ? "" : fmt::format(" such as {}, the default", escape_untrusted(def));
  if (has_type(op, "INT") || has_type(op, "UINT"))
    return "a whole number" + (def.empty() ? std::string(" such as 2") : such_as);
  if (is_float_option(op))
    return "a number" + (def.empty() ? std::string(" such as 1.5") : such_as);
  // Any other value: what the description says it takes, up to its first "; " outside
  // parentheses (the rest is detail), at most about 160 characters, cut after a whole item of
  // its list; or else its type name.
  const std::string text = op.get_description();
  std::string what = text;
  size_t last_item = 0;  // the end of the last whole item outside parentheses
  for (size_t i = 0, depth = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && depth > 0) --depth;
    if (depth != 0 || i + 1 >= text.size() || text[i + 1] != ' ') continue;
    if (text[i] == ';') {
      what = text.substr(0, i);
      break;
    }
    if (text[i] == ',' && i <= 157) last_item = i;
  }
  if (what.size() > 160) what = text.substr(0, last_item > 0 ? last_item : 157) + ", ...";
  if (what.empty()) what = op.get_type_name();
  return "a value" + such_as + (what.empty() ? "" : fmt::format(" ({})", what));
}

std::string option_value_error(CLI::Option& op, std::string value) {
  if (op.get_expected_min() == 0) {  // a switch
    return is_truth_value(value)
               ? std::string()
               : fmt::format("'{}' is no truth value (a switch takes true or false)",
                             escape_untrusted(value));
  }
  // In the order CLI11 runs them: the transforms added last first (these checks among them).
  for (int i = 0;; ++i) {
    CLI::Validator* check = nullptr;
    try {
      check = op.get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    if (std::string error = (*check)(value); !error.empty()) return error;
  }
  if ((has_type(op, "INT") || has_type(op, "UINT")) && !is_whole_number(value)) {
    return fmt::format("'{}' is not an integer (expected {})", escape_untrusted(value),
                       expected_value_text(op));
  }
  return {};
}

}  // namespace mantissa::app
