#pragma once
// Cleaning up after interrupted saves. save_safetensors writes "<path>.tmp.<pid>" and renames
// it over <path>; a process killed in between (kill -9, power loss) leaves the temporary file
// behind, and nothing else would ever remove it.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mantissa::io {

// Removes, from `dir` (not its subdirectories), the regular files named
// "<name>.safetensors.tmp.<pid>" whose writer is gone: no process <pid> exists, or the process
// now holding that pid started after the file was last written (the pid was reused; on Linux,
// read from /proc). A file a live writer may still be writing is kept. Returns the removed
// paths; a missing `dir` removes nothing. Errors while removing are ignored (the next run
// tries again).
std::vector<std::string> remove_stale_safetensors_temporaries(const std::string& dir);

// remove_stale_safetensors_temporaries, each removed file named on stderr ("mantissa: removed
// PATH, left behind by an interrupted WHAT"), for the checks of a directory a run writes to.
void remove_and_name_stale_safetensors_temporaries(const std::string& dir, std::string_view what);

// The temporary file this process is writing at `path`, registered while the object lives: a
// signal that ends the process at once (train/signals.cpp, a second interrupt) removes it first
// with remove_temporaries_being_written, so no "<path>.tmp.<pid>" is left behind in a directory
// the next run refuses as not empty. At most kMaxTemporariesBeingWritten at a time, of paths
// under kMaxTemporaryPathBytes: others are not registered (the next run's sweep above removes a
// stale .safetensors one).
class TemporaryBeingWritten {
 public:
  static constexpr int kMaxTemporariesBeingWritten = 8;
  static constexpr size_t kMaxTemporaryPathBytes = 4096;
  explicit TemporaryBeingWritten(const std::string& path);
  ~TemporaryBeingWritten();
  TemporaryBeingWritten(const TemporaryBeingWritten&) = delete;
  TemporaryBeingWritten& operator=(const TemporaryBeingWritten&) = delete;

 private:
  int slot_ = -1;  // -1: not registered
};

// Removes every registered TemporaryBeingWritten's file. Async-signal-safe (unlink(2) alone),
// for a signal handler about to _exit.
void remove_temporaries_being_written() noexcept;

}  // namespace mantissa::io
