// InterruptHandlers nest: compare and bench install them around all their runs, and each run
// installs them again. A signal received in an inner scope (a run that had already taken its
// last look at it) must stay pending when that scope ends, so that the next run stops and
// compare / bench do not run on after a Ctrl-C.
#include <gtest/gtest.h>

#include <csignal>

#include "mantissa/train/signals.h"

namespace mantissa {
namespace {

TEST(InterruptHandlers, NestedScopeKeepsTheSignalForTheOuterOne) {
  {
    train::InterruptHandlers outer;
    {
      train::InterruptHandlers inner;  // was an error: "already installed"
      EXPECT_FALSE(train::pending_interrupt().has_value());
      train::request_interrupt(SIGINT);
    }
    ASSERT_TRUE(train::pending_interrupt().has_value());
    EXPECT_EQ(*train::pending_interrupt(), SIGINT);
    {
      train::InterruptHandlers next_run;  // does not clear it
      EXPECT_EQ(train::pending_interrupt().value_or(0), SIGINT);
    }
  }
  // The outermost scope forgets it, as before.
  EXPECT_FALSE(train::pending_interrupt().has_value());
  // And a fresh outermost scope starts clear.
  train::request_interrupt(SIGTERM);
  train::InterruptHandlers again;
  EXPECT_FALSE(train::pending_interrupt().has_value());
}

}  // namespace
}  // namespace mantissa
