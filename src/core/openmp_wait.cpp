#include "mantissa/core/openmp_wait.h"

#include <fmt/format.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

namespace mantissa {
namespace {

// Marks a GOMP_SPINCOUNT that bound_openmp_spinning set, for `mantissa info`; processes this
// one starts (the ranks of --devices N) inherit both.
constexpr const char* kSetByMantissa = "MANTISSA_SET_GOMP_SPINCOUNT";

// Started as `/lib64/ld-linux-x86-64.so.2 mantissa ...`: /proc/self/exe is then the dynamic
// loader, which would take the first argument for the program. The kernel passes an
// interpreter's load address in AT_BASE only when the program it executed has one.
bool started_by_naming_the_loader() { return getauxval(AT_BASE) == 0; }

bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

// /proc/loadavg's running count ("0.52 0.58 0.59 3/412 12345": 3), -1 when unreadable.
int running_tasks() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double a = 0, b = 0, c = 0;
  int running = -1, total = 0;
  const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total);
  std::fclose(f);
  return got == 5 ? running : -1;
}

}  // namespace

const char* openmp_spin_count_for(int others_running) {
  return others_running >= 1 ? "0" : kOpenMpSpinCount;
}

int other_running_tasks() {
  int least = -1;
  for (int i = 0; i < 3; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const int r = running_tasks();
    if (r < 0) return -1;
    least = least < 0 ? r : std::min(least, r);
  }
  return std::max(0, least - 1);  // the reading counts this process
}

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (under_valgrind() || started_by_naming_the_loader()) return;
  const int others = other_running_tasks();
  const char* spin = openmp_spin_count_for(others);
  // The marker keeps the reading for `mantissa info` ("busy:N" or "idle").
  const std::string reading = others >= 1 ? fmt::format("busy:{}", others) : "idle";
  if (setenv("GOMP_SPINCOUNT", spin, 0) != 0 || setenv(kSetByMantissa, reading.c_str(), 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // Still here: no /proc, or the file is gone. Run with OpenMP's default, and say so in info.
  unsetenv("GOMP_SPINCOUNT");
  unsetenv(kSetByMantissa);
}

std::string describe_openmp_wait() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const char* reading = std::getenv(kSetByMantissa);
  if (spin != nullptr && policy == nullptr && reading != nullptr) {
    const std::string_view r = reading;
    const std::string why =
        r.rfind("busy:", 0) == 0
            ? fmt::format("{} other task{} running at the start, so idle threads sleep at once",
                          r.substr(5), r.substr(5) == "1" ? " was" : "s were")
            : std::string(
                  "the cores were free at the start; idle threads sleep soon, so "
                  "processes started later do not slow training down much");
    return fmt::format(
        "GOMP_SPINCOUNT={} (mantissa's default: {}; set OMP_WAIT_POLICY or GOMP_SPINCOUNT to "
        "choose)",
        spin, why);
  }
  if (policy == nullptr && spin == nullptr)
    return "OpenMP's default (idle threads spin for a while; on a busy machine set "
           "OMP_WAIT_POLICY=passive)";
  std::string text;
  if (policy != nullptr) text = fmt::format("OMP_WAIT_POLICY={}", policy);
  if (spin != nullptr) text += fmt::format("{}GOMP_SPINCOUNT={}", text.empty() ? "" : ", ", spin);
  return text + " (from the environment)";
}

}  // namespace mantissa
