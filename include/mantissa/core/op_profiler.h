#pragma once
// Op-level timing for the Trainer's profiler (include/mantissa/train/report/profiler.h): the ops
// and the backward engine open an OpScope, and while timing is on, the wall time of every outermost
// scope is added to its family ("forward" / "matmul", "backward" / "LinearBackward"). Ops
// called inside another op's scope (linear's matmul, a backward function's kernels) count for
// the outer one, so the families add up to the time spent in ops without double counting.
// Off by default: a scope then costs one relaxed atomic load.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace mantissa::profiling {

struct OpTime {
  int64_t calls = 0;
  double seconds = 0;
};

// Key: {phase, name}, phase "forward" or "backward".
using OpTimes = std::map<std::pair<std::string, std::string>, OpTime>;

void set_op_timing(bool enabled);
bool op_timing_enabled();
// What was recorded since the last reset_op_times().
OpTimes op_times();
void reset_op_times();

namespace detail {
extern std::atomic<bool> g_op_timing;
}

// The innermost op running on this thread ("linear", "LinearBackward"), empty outside ops:
// errors raised deep inside a kernel (a GPU tensor reaching CPU code) name the op with it.
std::string_view current_op();
namespace detail {
extern thread_local std::string_view t_current_op;
}

class OpScope {
 public:
  // phase: a string literal. The name is copied only while timing is on; `name` must outlive
  // the scope (a literal, or a graph node's name).
  OpScope(const char* phase, std::string_view name) : previous_op_(detail::t_current_op) {
    detail::t_current_op = name;
    if (detail::g_op_timing.load(std::memory_order_relaxed)) begin(phase, name);
  }
  ~OpScope() {
    detail::t_current_op = previous_op_;
    if (active_) end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  void begin(const char* phase, std::string_view name);
  void end();
  std::string_view previous_op_;
  bool active_ = false;
  bool outermost_ = false;
  const char* phase_ = nullptr;
  std::string name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mantissa::profiling

// Times the rest of the enclosing block as forward op `name` (a string literal).
#define MANTISSA_PROFILE_OP(name) \
  ::mantissa::profiling::OpScope mantissa_profile_op_scope_("forward", name)
