#pragma once
// A timer for the collectives of one rank (docs/distributed.md, "Failures"): MPI's blocking
// collectives never time out, so a rank that hangs (a deadlock, a stuck file system, a rank
// whose machine froze) would leave the others waiting forever. The communicator marks the
// stretch during which this rank waits inside a collective; a thread of the watchdog wakes a
// few times per timeout and, when one wait has lasted longer than the timeout, calls
// on_timeout (which reports and ends the job). The collective itself runs as before, so the
// numbers it produces do not change.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace mantissa::dist {

class CollectiveWatchdog {
 public:
  // on_timeout(name, sequence number, seconds waited) runs on the watchdog's thread; it is
  // expected not to return (it ends the job).
  using OnTimeout = std::function<void(const char* name, int64_t seq, double waited)>;
  explicit CollectiveWatchdog(OnTimeout on_timeout);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // 0 (or less): no timeout and no thread. Called from the thread that runs the collectives.
  void set_timeout(double seconds);
  double timeout() const { return timeout_s_; }

  // The calling thread waits in collective `name` (number `seq` of this rank) from now until
  // the Scope ends. `name` must be a string literal.
  class Scope {
   public:
    Scope(CollectiveWatchdog& w, const char* name, int64_t seq);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveWatchdog& w_;
  };

 private:
  void run();

  OnTimeout on_timeout_;
  double timeout_s_ = 0;
  // The current wait: its start (steady clock, ns; 0: none), name and sequence number.
  std::atomic<int64_t> since_ns_{0};
  std::atomic<const char*> name_{nullptr};
  std::atomic<int64_t> seq_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mantissa::dist
