#pragma once
// A file size limit for the test's duration, as a full disk looks to a writer: write(2) past
// `bytes` fails with EFBIG (SIGXFSZ ignored meanwhile). The limit and handler are restored when
// the object goes.
#include <sys/resource.h>

#include <csignal>

namespace mantissa::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved_;
    small.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  struct rlimit saved_ {};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace mantissa::testing
