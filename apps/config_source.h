#pragma once
// Where `--config` reads from: a regular file, or a stream (`-` for stdin, a pipe such as
// `--config <(jq ... run.json)`, a FIFO). CLI11 opens the option's value as a file with a
// blocking std::ifstream, which waits forever on a FIFO nobody writes to and reads /dev/zero
// until memory runs out; so a stream is read here first, safely, and CLI11 is handed a file
// holding its text.
#include <cstddef>
#include <string>

namespace mantissa::app {

// The most a config may hold, file or stream (a config is a few hundred bytes; a checkpoint
// given by mistake is gigabytes).
inline constexpr size_t kMaxConfigBytes = 1 << 20;
// How long a stream may stay silent (no writer yet, or one that writes nothing) before the read
// gives up: a FIFO without a writer blocked the run forever.
inline constexpr int kConfigStreamIdleSeconds = 10;

// The path CLI11 should open for --config `given`: `given` itself for a regular file or a path
// that does not exist (CLI11 names it missing); for `-` (stdin), a pipe or a FIFO, a private
// in-memory file holding the text read from it. The read stops with an error after
// kMaxConfigBytes bytes or kConfigStreamIdleSeconds without data, and stdin that is a terminal
// or a device is refused, as are devices (/dev/zero), directories and sockets given by path.
// Errors throw CLI::ConversionError beginning "the config file" (config_error_message adds the
// file's name).
std::string config_source_path(const std::string& given);

// The name the user gave for a path config_source_path returned ("stdin" for `-`), or `path`
// itself: messages about the config name what was typed, not /proc/self/fd/N.
std::string config_display_name(const std::string& path);

// Whether --config was read from a stream (stdin, a pipe, a FIFO), whose text cannot be read a
// second time (--devices restarts the command under mpirun, which would read it again).
bool config_read_from_stream();

}  // namespace mantissa::app
