#pragma once
// A switch (an on/off flag such as --fp8-disable-rht or --no-progress-bar) given twice is an
// error, as a value flag given twice is ("--max-steps was given 2 times; give it once"): CLI11
// lets switches repeat (it counts them), so a repeated switch, often a copy-paste slip or a
// script's flag added twice, was taken without a word.
#include <CLI/CLI.hpp>

namespace mantissa::app {

// Every switch of `app` and its subcommands (recursively), --help and --version aside, refuses
// a second occurrence (CLI11's MultiOptionPolicy::Throw, whose error parse_error_message
// rewords). Call after every option is added.
void refuse_repeated_switches(CLI::App& app);

}  // namespace mantissa::app
