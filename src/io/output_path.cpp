#include "mantissa/io/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mantissa/core/error.h"

namespace mantissa::io {
namespace {

namespace fs = std::filesystem;

// `subject` names the directory in messages, e.g. "--checkpoint-dir 'ckpt'".
void ensure_writable_dir(const fs::path& dir, const std::string& subject) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    MANTISSA_CHECK(fs::is_directory(dir, ec), "output",
                   "{} exists and is not a directory; give a directory path", subject);
  } else {
    fs::create_directories(dir, ec);
    MANTISSA_CHECK(!ec && fs::is_directory(dir), "output", "{} cannot be created: {}", subject,
                   ec ? ec.message() : std::string("a parent is not a directory"));
  }
  // Creating (and removing) a file is the only reliable writability test: access(2) says yes
  // to root on a read-only file system and knows nothing of quotas.
  const fs::path probe = dir / (".mantissa_write_probe." + std::to_string(::getpid()));
  {
    std::ofstream out(probe, std::ios::trunc);
    const int err = errno;
    MANTISSA_CHECK(out.good(), "output", "{} is not writable ({}); choose another location",
                   subject, std::strerror(err));
  }
  fs::remove(probe, ec);
}

}  // namespace

void prepare_output_dir(const std::string& dir, const std::string& what) {
  MANTISSA_CHECK(!dir.empty(), "output", "{} must not be empty", what);
  ensure_writable_dir(fs::path(dir), fmt::format("{} '{}'", what, dir));
}

void check_output_file(const std::string& path, const std::string& what) {
  MANTISSA_CHECK(!path.empty(), "output", "{} must not be empty", what);
  const fs::path p(path);
  std::error_code ec;
  MANTISSA_CHECK(!fs::is_directory(p, ec), "output",
                 "{} '{}' is a directory; give the path of a file (inside it, or elsewhere)", what,
                 path);
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  ensure_writable_dir(parent,
                      fmt::format("the directory '{}' of {} '{}'", parent.string(), what, path));
}

void write_text_file_atomically(const std::string& path, const std::string& text,
                                const std::string& what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    MANTISSA_CHECK(out.good(), what, "cannot write '{}'", tmp);
    out << text;
    MANTISSA_CHECK(out.good(), what, "write to '{}' failed", tmp);
  }
  MANTISSA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, what, "cannot rename '{}' to '{}'",
                 tmp, path);
}

}  // namespace mantissa::io
