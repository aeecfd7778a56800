#pragma once
// Names the flag behind a library error. The library reports in its own terms ("[TextCorpus]
// '/dev/zero' is a character device", "[precision] unknown precision 'nan'") and knows nothing of
// the command line; the command puts itself and the flag the user typed in front, so every
// error of a command names the flag to fix.
#include <CLI/CLI.hpp>

#include <string>

namespace mantissa::app {

// `message` (a mantissa::Error's text, "[where] what") as "[command] --flag: what" when it quotes
// the value of a flag given to the command that ran (on the command line or in its --config):
// 'VALUE' or 'VALUE/...' (a path inside a directory flag), 'VALUE... (N bytes)' cut short (a long
// value's start and its length), [VALUE] (a list), or "got VALUE" (the number a check refused). The
// longest such value wins. `message` unchanged when it already names a given flag, or quotes no
// value.
std::string name_flag_in_error(const CLI::App& app, const std::string& message);

}  // namespace mantissa::app
