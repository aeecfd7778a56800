#include "mantissa/core/warning.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

namespace mantissa {
namespace {

// The messages warn_once has said, behind one lock.
struct SaidOnce {
  std::mutex mutex;
  std::set<std::string> said;
};

SaidOnce& said_once() {
  static SaidOnce s;
  return s;
}

}  // namespace

void warn(const std::string& message) { fmt::print(stderr, "mantissa: warning: {}\n", message); }

void warn_once(const std::string& message) {
  SaidOnce& s = said_once();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.said.insert(message).second) warn(message);
}

void forget_warnings_said_once() {
  SaidOnce& s = said_once();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.said.clear();
}

}  // namespace mantissa
