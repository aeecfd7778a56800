#include "mantissa/core/terminal.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace mantissa {

bool stdout_is_terminal() {
  if (const char* given = std::getenv("MANTISSA_STDOUT_IS_TTY")) {
    if (std::strcmp(given, "0") == 0) return false;
    if (std::strcmp(given, "1") == 0) return true;
  }
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace mantissa
