#include "train/fault_injection.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "mantissa/core/error.h"

namespace mantissa::train::detail {
namespace {

struct Fault {
  std::string action, point;
  int rank = -1;
  long long at = 0;
};

// The parsed variable; an empty action when it is unset.
const Fault& fault() {
  static const Fault f = [] {
    Fault out;
    const char* v = std::getenv("MANTISSA_TEST_FAULT");
    if (v == nullptr || *v == '\0') return out;
    char action[16] = {0}, point[32] = {0};
    int rank = -1;
    long long at = 0;
    MANTISSA_CHECK(std::sscanf(v, "%15[a-z]:%d:%31[a-z_]:%lld", action, &rank, point, &at) == 4 &&
                       (std::string(action) == "hang" || std::string(action) == "kill") &&
                       rank >= 0 && at >= 1,
                   "MANTISSA_TEST_FAULT",
                   "'{}' is not ACTION:RANK:POINT:N (ACTION hang or kill, e.g. hang:1:backward:3)",
                   v);
    out.action = action;
    out.point = point;
    out.rank = rank;
    out.at = at;
    return out;
  }();
  return f;
}

}  // namespace

void fault_point(const char* point, int rank) {
  const Fault& f = fault();
  if (f.action.empty() || f.rank != rank || f.point != point) return;
  static std::map<std::string, long long> passed;
  if (++passed[f.point] != f.at) return;
  fmt::print(stderr, "mantissa: MANTISSA_TEST_FAULT: rank {} {} at {} {}\n", rank,
             f.action == "hang" ? "hangs" : "kills itself", point, f.at);
  std::fflush(stderr);
  if (f.action == "kill") std::raise(SIGKILL);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace mantissa::train::detail
