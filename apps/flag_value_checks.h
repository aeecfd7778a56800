#pragma once
// Checks every flag's value gets before CLI11 converts it, in one place for every command.
// CLI11 turns an empty value into the type's zero (`--max-steps ''` trained 0 steps,
// `--lr ''` at 0) or, for a path, into "not given" (`--resume ''` started afresh): an unset shell
// variable gave exactly that, in silence. And it converts numbers with strtold, which reads hex
// (`--lr 0x10` trained at 16), hex floats ("0x1p3") and inf/nan.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mantissa::app {

// Whether `text` is a decimal number: an optional sign, digits with an optional point (at least
// one digit), and an optional exponent with digits ("1", "-0.5", ".5", "3.", "1e-3", "2E+4").
// Not hex ("0x10", "0x1p3"), not "1e", "inf" or "nan".
bool is_decimal_number(const std::string& text);

// Adds to every option of `app` and its subcommands (recursively) that takes a value:
// - a check that refuses an empty value, naming the flag and what it takes, except for the
//   flags named in `empty_allowed` ("--sample-prompt"), for which "" means something;
// - for a floating-point option (CLI11's FLOAT), a check that the value is a decimal number
//   (is_decimal_number): no hex, no "inf" or "nan" (no flag takes an infinite or undefined
//   number; the flags' own checks said so only later, or not at all).
// Both run before the option's other checks and the conversion, on the command line's values and
// on a --config file's. Call after every option is added (after read_whole_numbers_in_decimal,
// so that these run first).
void check_flag_values(CLI::App& app, const std::vector<std::string>& empty_allowed = {});

// Whether `op` takes a floating-point number (CLI11's FLOAT), or any number (FLOAT, INT, UINT).
bool is_float_option(const CLI::Option& op);
bool is_number_option(const CLI::Option& op);

// What a flag of `op`'s type takes, for a message: "a whole number such as 1000, the default",
// "a number such as 0.001, the default", "a value such as mlp, the default (Model: mlp, cnn, vit
// or gpt)" (its description up to the first "; ").
std::string expected_value_text(const CLI::Option& op);

// What is wrong with `value` as a value of `op`, "" when nothing: the option's checks (those
// above, its own choices and ranges) and, for a whole-number option, whether it is one; for a
// switch, whether it is a truth value. For a --config value that the command line overrides,
// which CLI11 then never looks at ({"epochs": "1.5"} with --epochs 1 passed).
std::string option_value_error(CLI::Option& op, std::string value);

}  // namespace mantissa::app
