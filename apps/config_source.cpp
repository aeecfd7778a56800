#include "config_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <CLI/CLI.hpp>

namespace mantissa::app {
namespace {

// The in-memory files made for streams, and the names the user gave them.
struct StreamCopy {
  std::string given;  // "-", "/dev/fd/63", "run.fifo"
  std::string path;   // /proc/self/fd/N
  std::string shown;  // "stdin", "/dev/fd/63", "run.fifo"
};

std::vector<StreamCopy>& stream_copies() {
  static std::vector<StreamCopy> copies;
  return copies;
}

[[noreturn]] void refuse(const std::string& what) {
  throw CLI::ConversionError("the config file " + what);
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The whole text of `fd` up to its end, refused beyond kMaxConfigBytes or after
// kConfigStreamIdleSeconds without a byte. poll before every read: a FIFO whose writer never
// comes is never readable, and its blocking read would never return.
std::string read_stream(int fd) {
  std::string text;
  std::vector<char> buffer(64 * 1024);
  while (true) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&p, 1, kConfigStreamIdleSeconds * 1000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (p.revents & POLLNVAL) != 0)
      refuse(fmt::format("cannot be read: {}", std::strerror(errno)));
    if (ready == 0) {
      refuse(fmt::format(
          "is a pipe or FIFO that sent nothing for {} seconds (no writer, or one that never "
          "writes): start the command that writes it first, or write the flags to a file",
          kConfigStreamIdleSeconds));
    }
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) refuse(fmt::format("cannot be read: {}", std::strerror(errno)));
    if (n == 0) return text;
    text.append(buffer.data(), static_cast<size_t>(n));
    // As a regular file's: read no further than one byte past the limit.
    if (text.size() > kMaxConfigBytes)
      refuse(fmt::format("has more than {} bytes, the most a config may have", kMaxConfigBytes));
  }
}

// Keeps `text` in an in-memory file of this process and returns a path that opens it.
std::string in_memory_file(const std::string& text, const std::string& given,
                           const std::string& shown) {
  const int fd = ::memfd_create("mantissa-config", MFD_CLOEXEC);
  if (fd < 0)
    refuse(fmt::format("could not be kept in memory ({}); write the flags to a file",
                       std::strerror(errno)));
  for (size_t done = 0; done < text.size();) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      refuse(fmt::format("could not be kept in memory ({}); write the flags to a file",
                         std::strerror(errno)));
    done += static_cast<size_t>(w);
  }
  // Open for the rest of the process: CLI11 opens the path after this returns.
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  stream_copies().push_back({given, path, shown});
  return path;
}

std::string read_stdin() {
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0)
    refuse(fmt::format("- (stdin) cannot be read: {}", std::strerror(errno)));
  if (::isatty(STDIN_FILENO)) {
    refuse(
        "- (stdin) is a terminal; pipe the JSON in (mantissa train --config - < run.json) or give "
        "the file's path");
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISDIR(st.st_mode)) {
    refuse(fmt::format("- (stdin) is {}; pipe the JSON in (mantissa train --config - < run.json)",
                       kind_of(st.st_mode)));
  }
  return in_memory_file(read_stream(STDIN_FILENO), "-", "stdin");
}

std::string read_fifo(const std::string& given) {
  // Non-blocking: a blocking open of a FIFO waits for a writer, forever if none comes. Then
  // blocking again, so a read after poll takes what the writer sent (read_stream).
  const int fd = ::open(given.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) refuse(fmt::format("cannot be opened: {}", std::strerror(errno)));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  try {
    text = read_stream(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return in_memory_file(text, given, given);
}

}  // namespace

std::string config_source_path(const std::string& given) {
  // CLI11 runs an option's transform more than once (when it reads the value for the config
  // file, and again in the option's callback); a stream gives its text once.
  for (const StreamCopy& copy : stream_copies())
    if (copy.given == given) return copy.path;
  if (given == "-") return read_stdin();
  struct stat st {};
  // Missing or unreadable: CLI11's open says so ("no such file, or not readable").
  if (::stat(given.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return given;
  // A pipe (`<(...)` is /dev/fd/N) or a named FIFO.
  if (S_ISFIFO(st.st_mode)) return read_fifo(given);
  refuse(fmt::format(
      "is {}; --config reads a regular JSON file, a pipe or FIFO, or - (stdin), not a device "
      "(/dev/zero never ends), directory or socket",
      kind_of(st.st_mode)));
}

std::string config_display_name(const std::string& path) {
  if (path == "-") return "stdin";
  for (const StreamCopy& copy : stream_copies())
    if (copy.path == path) return copy.shown;
  return path;
}

bool config_read_from_stream() { return !stream_copies().empty(); }

}  // namespace mantissa::app
