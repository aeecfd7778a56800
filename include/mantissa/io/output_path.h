#pragma once
// Checks that an output location can be written BEFORE a long run starts, so a typo in a
// directory or a read-only path fails in the first second instead of after hours of training.
// The checks create missing parent directories and probe with a temporary file that they
// remove again (permission bits alone do not tell: read-only mounts, ACLs, root).
#include <filesystem>
#include <string>
#include <vector>

namespace mantissa::io {

// Makes sure `dir` is a directory this process can create files in: creates it (and its
// parents) when missing; throws mantissa::Error naming `what` (e.g. "--checkpoint-dir") when it
// is a file, cannot be created or is not writable.
void prepare_output_dir(const std::string& dir, const std::string& what);

// The names of what directory `dir` holds, sorted; none when `dir` is missing or is not a
// directory. prepare_output_dir's write probes (".mantissa_write_probe.<pid>", there only while
// it runs, perhaps another rank's) are left out.
std::vector<std::string> directory_entries(const std::string& dir);

// `path` made absolute and resolved as std::filesystem::weakly_canonical resolves it (so a run
// from another working directory names the same place); `path` as given where that fails.
std::string absolute_path(const std::string& path);

// Whether `path` is directory `dir` itself or lies inside it, compared after
// std::filesystem::weakly_canonical (so "m/", "./m", "m/../m" and a symlink to m are m); parts
// that do not exist yet are compared as written. False when either cannot be resolved.
bool same_or_inside(const std::string& path, const std::string& dir);

// Takes back what prepare_output_dir creates for an output that a run writes only at its end
// (fine-tuning's --output-dir): made before prepare_output_dir, it remembers which of `dir` and
// its parents do not exist yet, and when it is destroyed before keep() (the run failed or was
// interrupted before writing) it removes those of them that are still empty, deepest first. A
// directory that existed before, or that holds anything, stays.
class NewDirectoryCleanup {
 public:
  explicit NewDirectoryCleanup(const std::string& dir);
  ~NewDirectoryCleanup();
  NewDirectoryCleanup(const NewDirectoryCleanup&) = delete;
  NewDirectoryCleanup& operator=(const NewDirectoryCleanup&) = delete;
  // The run reached its writes: nothing is removed.
  void keep() { missing_.clear(); }
  // The directories it would remove, deepest first (for train::ExitOnInterrupt).
  std::vector<std::string> made() const;

 private:
  std::vector<std::filesystem::path> missing_;  // deepest first
};

// Makes sure a file can be written at `path` by the usual temp-file-then-rename: `path` must
// not be a directory nor another non-regular file (check_replaceable_by_file), and its directory
// (created when missing) must be writable. An existing file is left untouched.
void check_output_file(const std::string& path, const std::string& what);

// Throws mantissa::Error naming `what` when `path` exists and is neither a regular file nor a
// directory: a device (/dev/null, /dev/stdout's terminal), a FIFO or a socket. Renaming a new
// file over it would replace the node itself (as root, /dev/null for everyone), not write into
// it. A missing path, a regular file and a symlink to one pass.
void check_replaceable_by_file(const std::string& path, const std::string& what);

// Writes `text` to `path` whole or not at all: into "<path>.tmp.<pid>", fsync'ed, then renamed
// over `path`, so a reader never sees half a file. Throws mantissa::Error naming `what` when it
// cannot (a full disk, a `path` check_replaceable_by_file refuses); the temporary file is then
// removed and `path` left as it was.
void write_text_file_atomically(const std::string& path, const std::string& text,
                                const std::string& what);

}  // namespace mantissa::io
