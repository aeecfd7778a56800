#pragma once
// --untimed-steps for bench and compare: the steps each timed run trains before its clock starts.
// They were --warmup-steps, which in `mantissa train --model gpt` is the learning-rate warm-up
// (a different thing under the same name); --warmup-steps stays a deprecated alias here for one
// release: it warns, naming --untimed-steps, then works.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace mantissa::app {

// Adds --untimed-steps (help text `help`, default *steps) and its deprecated alias
// --warmup-steps, both writing *steps; giving both is refused. Returns the alias, for
// warn_deprecated_untimed_steps_alias.
CLI::Option* add_untimed_steps_option(CLI::App& cmd, int64_t* steps, const std::string& help);

// The warning for the alias: "--warmup-steps is deprecated in `mantissa <command>` ...".
std::string deprecated_untimed_steps_alias_warning(const std::string& command);

// Warns (core/warning.h) when `alias` (add_untimed_steps_option's) was given. Called from the
// command's callback, so that a WarningRecorder there (compare's reports) records it too.
void warn_deprecated_untimed_steps_alias(const CLI::Option* alias, const std::string& command);

}  // namespace mantissa::app
