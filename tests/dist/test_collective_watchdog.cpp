// The collective watchdog (src/dist/collective_watchdog.h): a wait longer than the timeout
// calls on_timeout once with the collective's name, number and the time waited; waits that end
// in time, and any wait with the timeout off, call nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "dist/collective_watchdog.h"

using namespace mantissa::dist;
using namespace std::chrono_literals;

namespace {

struct Seen {
  std::atomic<int> calls{0};
  std::atomic<int64_t> seq{0};
  std::atomic<double> waited{0};
  std::string name;  // written before calls is raised
};

CollectiveWatchdog::OnTimeout recorder(Seen& seen) {
  return [&seen](const char* name, int64_t seq, double waited) {
    if (seen.calls.load() == 0) {
      seen.name = name;
      seen.seq = seq;
      seen.waited = waited;
    }
    seen.calls.fetch_add(1);
  };
}

}  // namespace

TEST(CollectiveWatchdog, AWaitPastTheTimeoutIsReportedWithItsNameAndNumber) {
  Seen seen;
  CollectiveWatchdog w(recorder(seen));
  w.set_timeout(0.2);
  EXPECT_DOUBLE_EQ(w.timeout(), 0.2);
  {
    CollectiveWatchdog::Scope waiting(w, "barrier", 7);
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (seen.calls.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
  }
  w.set_timeout(0);  // joins the thread before `seen` is read
  ASSERT_GE(seen.calls.load(), 1);
  EXPECT_EQ(seen.name, "barrier");
  EXPECT_EQ(seen.seq.load(), 7);
  EXPECT_GE(seen.waited.load(), 0.2);
  EXPECT_LT(seen.waited.load(), 5.0);
}

TEST(CollectiveWatchdog, WaitsWithinTheTimeoutAndWaitsWithItOffAreNotReported) {
  Seen seen;
  CollectiveWatchdog w(recorder(seen));
  w.set_timeout(0.5);
  for (int i = 0; i < 10; ++i) {
    CollectiveWatchdog::Scope waiting(w, "all_reduce", i);
    std::this_thread::sleep_for(20ms);  // 10 waits of 20 ms: 200 ms in all, each far below
  }
  std::this_thread::sleep_for(700ms);  // no wait open: nothing to report
  w.set_timeout(0);
  {
    CollectiveWatchdog::Scope waiting(w, "broadcast", 11);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(seen.calls.load(), 0);
  EXPECT_DOUBLE_EQ(w.timeout(), 0.0);
}
