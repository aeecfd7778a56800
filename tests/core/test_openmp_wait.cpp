// The OpenMP spin count mantissa chooses at the start: spinning while the cores are free, none
// once another task is running (include/mantissa/core/openmp_wait.h).
#include <gtest/gtest.h>

#include <string>

#include "mantissa/core/openmp_wait.h"

namespace mantissa {
namespace {

TEST(OpenMpWait, SpinsOnlyWhileNoOtherTaskRuns) {
  EXPECT_EQ(std::string(openmp_spin_count_for(0)), kOpenMpSpinCount);
  EXPECT_EQ(std::string(openmp_spin_count_for(1)), "0");
  EXPECT_EQ(std::string(openmp_spin_count_for(7)), "0");
  // An unreadable /proc/loadavg keeps the bounded spin rather than guessing a busy machine.
  EXPECT_EQ(std::string(openmp_spin_count_for(-1)), kOpenMpSpinCount);
}

TEST(OpenMpWait, ReadsTheRunningTasksOfThisMachine) {
  // Linux has /proc/loadavg; the count excludes this process, so it is at least 0.
  EXPECT_GE(other_running_tasks(), 0);
}

}  // namespace
}  // namespace mantissa
