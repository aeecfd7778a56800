#pragma once
// The scope guard behind NoGradGuard / EnableGradGuard, DefaultDtypeGuard and
// Float32MatmulPrecisionGuard: it sets a value on entry and restores the value from before it on
// exit, and it stays right when guards are closed out of order (held by unique_ptr or optional
// and reset in another order than made). Restoring a guard's saved value while a guard opened
// inside it is still open would be undone when that one closes (it restores what the outer one
// set, so the outer's value outlived every guard); instead the guards open on a thread are
// tracked, and one closed early hands its saved value to the guard opened just inside it. While
// some are open the value is what the innermost open one set; once all are closed it is what it
// was before the first, as closing in order would leave it.
//
// A Setting is a struct with
//   using Value = ...;
//   static Value get();  static void set(Value);  (set may throw for an invalid value)
//   static constexpr bool kProcessWide;  the value is one for the process, not one per thread
//   static constexpr const char* kGuards;  the guards in warnings: "default-dtype guards
//                                          (DefaultDtypeGuard)"
//   static constexpr const char* kValue;   the value in warnings: "the default dtype"
// Each user declares `extern template class ScopedSetting<Setting>;` in its header and
// instantiates it in its .cpp, so the list of open guards is the library's one.
#include <algorithm>
#include <string>
#include <vector>

#include "mantissa/core/warning.h"

namespace mantissa::detail {

template <class Setting>
class ScopedSetting {
 public:
  using Value = typename Setting::Value;
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 protected:
  explicit ScopedSetting(Value value) : prev_(Setting::get()) {
    Setting::set(value);  // first: a value it refuses leaves no guard open
    open_guards().push_back(this);
  }

  ~ScopedSetting() {
    auto& open = open_guards();
    const auto it = std::find(open.begin(), open.end(), this);
    if (it == open.end()) {
      // Closed on another thread than it was opened on. A per-thread value of that thread is
      // out of reach; a process-wide one is restored, as an untracked guard would.
      if constexpr (Setting::kProcessWide) Setting::set(prev_);
      warn_once(std::string("one of the ") + Setting::kGuards +
                " was closed on another thread than the one that opened it" +
                (Setting::kProcessWide
                     ? std::string("; ") + Setting::kValue +
                           " was restored without regard to guards still open"
                     : std::string("; that thread's ") + Setting::kValue + " was not restored") +
                " (open and close each guard on one thread)");
      return;
    }
    if (it + 1 != open.end()) {
      warn_once(std::string(Setting::kGuards) +
                " were closed out of order (a guard closed while a guard opened inside it "
                "was still open); " +
                Setting::kValue + " is restored as if they had closed in order, innermost first");
      (*(it + 1))->prev_ = prev_;
      open.erase(it);
      return;
    }
    open.pop_back();
    Setting::set(prev_);
  }

 private:
  // The guards of this Setting open on this thread, innermost last.
  static std::vector<ScopedSetting*>& open_guards() {
    thread_local std::vector<ScopedSetting*> guards;
    return guards;
  }

  Value prev_;
};

}  // namespace mantissa::detail
