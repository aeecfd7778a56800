// --threads beyond any useful oversubscription is refused with the figure to use: libgomp
// allocates a team's state up front and aborted the process ("libgomp: Out of memory
// allocating 481036338272 bytes", then "terminate called without an active exception") for
// --threads 2147483647 in train, bench and compare. Up to the bound it runs, as before.
#include <gtest/gtest.h>

#include <omp.h>

#include <string>

#include "mantissa/recipes/thread_count.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;

TEST(ThreadCount, ACountBeyondTheBoundPerCoreIsRefusedWithTheFigure) {
  const int cores = omp_get_num_procs();
  const int most = kMaxThreadsPerCore * cores;
  expect_error([] { apply_thread_count(2147483647); },
               {"--threads 2147483647 is more than 64 per core of this machine's " +
                    std::to_string(cores) + " cores",
                "use at most --threads " + std::to_string(most)});
  expect_error([&] { apply_thread_count(most + 1); }, "--threads " + std::to_string(most + 1));
  expect_error([] { apply_thread_count(-1); }, "--threads must be at least 1, got -1");

  const int before = omp_get_max_threads();
  apply_thread_count(most);  // oversubscribed (a warning) but allowed
  EXPECT_EQ(omp_get_max_threads(), most);
  apply_thread_count(before);
  EXPECT_EQ(omp_get_max_threads(), before);
}

}  // namespace
}  // namespace mantissa::recipes
