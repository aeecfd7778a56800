#pragma once
// Whole-number flags read as written, in decimal. CLI11 converts them with strtoll/strtoull in
// base 0, which reads "010" as octal 8 (`--epochs 010` would train 8 epochs) and "0x10" as 16,
// and which saturate instead of failing: `--batch-size 99999999999999999999` would run with
// INT64_MAX and `--seed 99999999999999999999` with 2^64 - 1, where the doc says "is out of range".
#include <CLI/CLI.hpp>

namespace mantissa::app {

// Adds to every option of `app` and its subcommands (recursively) whose type is a whole number
// (CLI11's INT or UINT) a check that runs before the conversion: an optional sign and decimal
// digits are read in base 10 (leading zeros included), passed on without leading zeros; a value
// outside int64 (uint64 for UINT) is "out of range"; 0x/0b/0o prefixes are "not an integer".
// Other text is left to CLI11's conversion, which refuses it. Call after every option is added.
void read_whole_numbers_in_decimal(CLI::App& app);

}  // namespace mantissa::app
