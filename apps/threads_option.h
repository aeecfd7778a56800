#pragma once
// --threads for train, compare and bench: checked before any work (mantissa/recipes/thread_count.h
// applies it).
#include <CLI/CLI.hpp>

namespace mantissa::app {

// Throws mantissa::Error when --threads was given with a value below 1 (leaving it out means
// all cores). `command` names the subcommand in the message.
void check_threads_option(const CLI::Option* option, int threads, const char* command);

}  // namespace mantissa::app
