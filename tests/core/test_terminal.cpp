// stdout_is_terminal (core/terminal.h): MANTISSA_STDOUT_IS_TTY, which `mantissa train
// --devices N` sets for its ranks, overrides isatty (mpirun hands the ranks a pseudo-terminal).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "mantissa/core/terminal.h"

namespace mantissa {
namespace {

TEST(Terminal, EnvironmentOverridesIsatty) {
  const bool real = ::isatty(STDOUT_FILENO) == 1;
  ::setenv("MANTISSA_STDOUT_IS_TTY", "0", 1);
  EXPECT_FALSE(stdout_is_terminal());
  ::setenv("MANTISSA_STDOUT_IS_TTY", "1", 1);
  EXPECT_TRUE(stdout_is_terminal());
  ::setenv("MANTISSA_STDOUT_IS_TTY", "yes", 1);  // not 0 or 1: isatty decides
  EXPECT_EQ(stdout_is_terminal(), real);
  ::unsetenv("MANTISSA_STDOUT_IS_TTY");
  EXPECT_EQ(stdout_is_terminal(), real);
}

}  // namespace
}  // namespace mantissa
