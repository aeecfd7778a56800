#pragma once
// --threads for train, compare and bench: checked before any work, applied to OpenMP (and so
// to oneDNN).
#include <CLI/CLI.hpp>

namespace mantissa::app {

// Throws mantissa::Error when --threads was given with a value below 1 (leaving it out means
// all cores). `command` names the subcommand in the message.
void check_threads_option(const CLI::Option* option, int threads, const char* command);

// Sets OpenMP's thread count: 0 keeps the default (all cores), negative is an error, and more
// threads than this machine has cores runs (oversubscribed, much slower) with a warning, printed
// once per process.
void apply_thread_count(int threads);

}  // namespace mantissa::app
