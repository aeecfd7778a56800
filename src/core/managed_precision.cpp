#include "mantissa/core/managed_precision.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

namespace mantissa {
namespace {
thread_local const ManagedPrecision* t_managed = nullptr;
thread_local int t_internal = 0;
std::mutex g_mutex;
std::set<std::string> g_warned;  // kinds already warned about
}  // namespace

ManagedPrecisionScope::ManagedPrecisionScope(std::string plugin, std::string place)
    : previous_(t_managed), current_{std::move(plugin), std::move(place)} {
  t_managed = &current_;
}

ManagedPrecisionScope::~ManagedPrecisionScope() { t_managed = previous_; }

const ManagedPrecision* managed_precision() { return t_managed; }

InternalCastScope::InternalCastScope() { ++t_internal; }
InternalCastScope::~InternalCastScope() { --t_internal; }
bool in_internal_cast() { return t_internal > 0; }

bool warn_if_cast_by_hand(const char* kind, const std::string& what) {
  const ManagedPrecision* m = t_managed;
  if (m == nullptr || t_internal > 0) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_warned.insert(kind).second) {
    fmt::print(stderr,
               "mantissa: warning: {} inside {}, whose precision plugin {} already manages the "
               "dtypes of the step (autocast, parameter casts, loss scaling); casting by hand "
               "fights the plugin -- remove it, or choose another precision (this warning is "
               "shown once)\n",
               what, m->place, m->plugin);
  }
  return true;
}

void reset_cast_by_hand_warnings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_warned.clear();
}

}  // namespace mantissa
