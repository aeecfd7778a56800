#include "mantissa/core/warning.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

namespace mantissa {

void warn(const std::string& message) { fmt::print(stderr, "mantissa: warning: {}\n", message); }

void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(message).second) warn(message);
}

}  // namespace mantissa
