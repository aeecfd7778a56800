#include "mantissa/core/op_profiler.h"

#include <mutex>

namespace mantissa::profiling {
namespace detail {
std::atomic<bool> g_op_timing{false};
thread_local std::string_view t_current_op;
}  // namespace detail

namespace {
std::mutex g_mutex;
OpTimes g_times;
// Depth of open scopes on this thread: only depth-0 scopes record.
thread_local int t_depth = 0;
}  // namespace

std::string_view current_op() { return detail::t_current_op; }

void set_op_timing(bool enabled) { detail::g_op_timing.store(enabled, std::memory_order_relaxed); }
bool op_timing_enabled() { return detail::g_op_timing.load(std::memory_order_relaxed); }

OpTimes op_times() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_times;
}

void reset_op_times() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_times.clear();
}

void OpScope::begin(const char* phase, std::string_view name) {
  active_ = true;
  outermost_ = t_depth == 0;
  ++t_depth;
  if (!outermost_) return;
  phase_ = phase;
  name_.assign(name);
  start_ = std::chrono::steady_clock::now();
}

void OpScope::end() {
  --t_depth;
  if (!outermost_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard<std::mutex> lock(g_mutex);
  OpTime& t = g_times[{phase_, name_}];
  ++t.calls;
  t.seconds += s;
}

}  // namespace mantissa::profiling
