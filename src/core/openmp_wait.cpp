#include "mantissa/core/openmp_wait.h"

#include <fmt/format.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (under_valgrind() || started_by_naming_the_loader()) return;
  if (setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 0) != 0 || setenv(kSetByMantissa, "1", 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // Still here: no /proc, or the file is gone. Run with OpenMP's default, and say so in info.
  unsetenv("GOMP_SPINCOUNT");
  unsetenv(kSetByMantissa);
}

std::string describe_openmp_wait() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  if (spin != nullptr && policy == nullptr && std::getenv(kSetByMantissa) != nullptr)
    return fmt::format(
        "GOMP_SPINCOUNT={} (mantissa's default: idle threads sleep soon, so other processes on "
        "these cores do not slow training down; set OMP_WAIT_POLICY or GOMP_SPINCOUNT to choose)",
        spin);
  if (policy == nullptr && spin == nullptr)
    return "OpenMP's default (idle threads spin for a while; on a busy machine set "
           "OMP_WAIT_POLICY=passive)";
  std::string text;
  if (policy != nullptr) text = fmt::format("OMP_WAIT_POLICY={}", policy);
  if (spin != nullptr) text += fmt::format("{}GOMP_SPINCOUNT={}", text.empty() ? "" : ", ", spin);
  return text + " (from the environment)";
}

}  // namespace mantissa
