#include "dist/collective_watchdog.h"

#include <algorithm>
#include <chrono>

namespace mantissa::dist {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CollectiveWatchdog::CollectiveWatchdog(OnTimeout on_timeout) : on_timeout_(std::move(on_timeout)) {}

CollectiveWatchdog::~CollectiveWatchdog() { set_timeout(0); }

void CollectiveWatchdog::set_timeout(double seconds) {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  timeout_s_ = seconds > 0 ? seconds : 0;
  if (timeout_s_ == 0) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void CollectiveWatchdog::run() {
  const auto timeout_ns = static_cast<int64_t>(timeout_s_ * 1e9);
  // Checked 20 times per timeout (at most once a second, at least every 10 ms): a wait ends
  // the job between 1 and 1.05 timeouts after it began.
  const auto period =
      std::chrono::nanoseconds(std::clamp<int64_t>(timeout_ns / 20, 10'000'000, 1'000'000'000));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    const int64_t since = since_ns_.load(std::memory_order_acquire);
    if (since == 0 || now_ns() - since < timeout_ns) continue;
    const char* name = name_.load(std::memory_order_acquire);
    const int64_t seq = seq_.load(std::memory_order_acquire);
    // The same wait still (not one that began after the first load)?
    if (since_ns_.load(std::memory_order_acquire) != since) continue;
    lock.unlock();
    on_timeout_(name, seq, static_cast<double>(now_ns() - since) / 1e9);
    lock.lock();
  }
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog& w, const char* name, int64_t seq) : w_(w) {
  if (w_.timeout_s_ == 0) return;
  w_.name_.store(name, std::memory_order_release);
  w_.seq_.store(seq, std::memory_order_release);
  w_.since_ns_.store(now_ns(), std::memory_order_release);
}

CollectiveWatchdog::Scope::~Scope() { w_.since_ns_.store(0, std::memory_order_release); }

}  // namespace mantissa::dist
