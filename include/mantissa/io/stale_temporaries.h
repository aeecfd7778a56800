#pragma once
// Cleaning up after interrupted saves. save_safetensors writes "<path>.tmp.<pid>" and renames
// it over <path>; a process killed in between (kill -9, power loss) leaves the temporary file
// behind, and nothing else would ever remove it.
#include <string>
#include <vector>

namespace mantissa::io {

// Removes, from `dir` (not its subdirectories), the regular files named
// "<name>.safetensors.tmp.<pid>" whose writer is gone: no process <pid> exists, or the process
// now holding that pid started after the file was last written (the pid was reused; on Linux,
// read from /proc). A file a live writer may still be writing is kept. Returns the removed
// paths; a missing `dir` removes nothing. Errors while removing are ignored (the next run
// tries again).
std::vector<std::string> remove_stale_safetensors_temporaries(const std::string& dir);

}  // namespace mantissa::io
