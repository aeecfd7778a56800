#include "mantissa/io/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/io/stale_temporaries.h"

namespace mantissa::io {
namespace {

namespace fs = std::filesystem;

// The reason for a failed create in `dir`, which exists. Virtual file systems (/proc, /sys)
// answer ENOENT for a file that cannot exist there, which strerror turns into a puzzling "No
// such file or directory" about a directory that is plainly there.
std::string create_failure_reason(int err, const fs::path& dir) {
  if (err == ENOENT)
    return fmt::format("'{}' is on a file system that does not allow new entries (as /proc, /sys)",
                       dir.string());
  return std::strerror(err);
}

// The deepest existing ancestor of `p` (".", when none of its parts exist).
fs::path existing_ancestor(fs::path p) {
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  return p.empty() ? fs::path(".") : p;
}

constexpr std::string_view kWriteProbePrefix = ".mantissa_write_probe.";

// `subject` names the directory in messages, e.g. "--checkpoint-dir 'ckpt'".
void ensure_writable_dir(const fs::path& dir, const std::string& subject) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    MANTISSA_CHECK(fs::is_directory(dir, ec), "output",
                   "{} exists and is not a directory; give a directory path", subject);
  } else {
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      const fs::path ancestor = existing_ancestor(dir);
      const std::string why = !ec ? "a parent is not a directory"
                              : ec.value() == ENOENT && fs::is_directory(ancestor)
                                  ? create_failure_reason(ENOENT, ancestor)
                                  : ec.message();
      fail("output", "{} cannot be created: {}; choose another location", subject, why);
    }
  }
  // Creating (and removing) a file is the only reliable writability test: access(2) says yes
  // to root on a read-only file system and knows nothing of quotas. open(2) directly, so errno
  // is the create's own.
  const fs::path probe = dir / (std::string(kWriteProbePrefix) + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  MANTISSA_CHECK(fd >= 0, "output", "{} is not writable: {}; choose another location", subject,
                 create_failure_reason(errno, dir));
  ::close(fd);
  fs::remove(probe, ec);
}

}  // namespace

void prepare_output_dir(const std::string& dir, const std::string& what) {
  MANTISSA_CHECK(!dir.empty(), "output", "{} must not be empty", what);
  ensure_writable_dir(fs::path(dir), fmt::format("{} '{}'", what, dir));
}

std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(kWriteProbePrefix, 0) != 0) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : p.string();
}

bool same_or_inside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return false;
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return false;
  // Component by component: "m2" does not lie in "m"; a trailing separator's empty part is
  // not a component.
  auto pi = p.begin();
  for (const fs::path& part : d) {
    if (part.empty()) continue;
    while (pi != p.end() && pi->empty()) ++pi;
    if (pi == p.end() || *pi != part) return false;
    ++pi;
  }
  return true;
}

NewDirectoryCleanup::NewDirectoryCleanup(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    missing_.push_back(p);
    if (p == p.parent_path()) break;
  }
}

std::vector<std::string> NewDirectoryCleanup::made() const {
  std::vector<std::string> paths;
  for (const fs::path& p : missing_) paths.push_back(p.string());
  return paths;
}

NewDirectoryCleanup::~NewDirectoryCleanup() {
  std::error_code ec;
  for (const fs::path& p : missing_) {
    if (!fs::is_directory(p, ec) || !fs::is_empty(p, ec) || ec) return;
    fs::remove(p, ec);
  }
}

void check_replaceable_by_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return;
  const char* kind = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                     : S_ISFIFO(st.st_mode)                     ? "a FIFO (named pipe)"
                     : S_ISSOCK(st.st_mode)                     ? "a socket"
                                                                : "not a regular file";
  fail("output",
       "{} '{}' is {}: mantissa writes a file whole (a temporary file renamed over the path), "
       "which would replace it rather than write into it; give the path of a regular file",
       what, path, kind);
}

void check_output_file(const std::string& path, const std::string& what) {
  MANTISSA_CHECK(!path.empty(), "output", "{} must not be empty", what);
  const fs::path p(path);
  std::error_code ec;
  MANTISSA_CHECK(!fs::is_directory(p, ec), "output",
                 "{} '{}' is a directory; give the path of a file (inside it, or elsewhere)", what,
                 path);
  check_replaceable_by_file(path, what);
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  ensure_writable_dir(parent,
                      fmt::format("the directory '{}' of {} '{}'", parent.string(), what, path));
}

void write_text_file_atomically(const std::string& path, const std::string& text,
                                const std::string& what) {
  // Every step's result is checked, close(2) included: an ofstream's last buffer is written by
  // its destructor, whose failure (a full disk) went unseen, and the rename then replaced a good
  // file with an empty or cut one. On any failure the temporary file is removed and `path` is
  // left as it was.
  check_replaceable_by_file(path, what);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const TemporaryBeingWritten being_written(tmp);  // removed by a signal that ends the process
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  MANTISSA_CHECK(fd >= 0, what, "cannot create '{}': {}", tmp, std::strerror(errno));
  const auto give_up = [&](const char* step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail(what, "{} '{}' failed: {}; '{}' is left as it was", step, tmp, std::strerror(err), path);
  };
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) give_up("writing");
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) give_up("fsync of");
  const int closing = fd;
  fd = -1;
  if (::close(closing) != 0) give_up("closing");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(what, "cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
}

}  // namespace mantissa::io
