#pragma once
// A CLI11 check for unsigned options (--seed): CLI11 would otherwise read "-1" as 2^64 - 1.
#include <string>

#include <CLI/CLI.hpp>

namespace mantissa::app {

inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) {
        return !value.empty() && value.front() == '-' ? std::string("must not be negative")
                                                      : std::string();
      },
      "NON-NEGATIVE");
}

}  // namespace mantissa::app
