#include "mantissa/core/warning.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <vector>

namespace mantissa {
namespace {

// The messages warn_once has said, behind one lock.
struct SaidOnce {
  std::mutex mutex;
  std::set<std::string> said;
};

SaidOnce& said_once() {
  static SaidOnce s;
  return s;
}

// The live WarningRecorders, behind one lock (warnings may come from worker threads).
struct Recorders {
  std::mutex mutex;
  std::vector<WarningRecorder*> live;
};

Recorders& recorders() {
  static Recorders r;
  return r;
}

// How many WarningSilencers are alive (on any thread).
std::atomic<int> silencers{0};
// Off on the ranks of a data-parallel job other than 0 (set_warnings_on_stderr).
std::atomic<bool> g_warnings_on_stderr{true};

}  // namespace

WarningSilencer::WarningSilencer() { silencers.fetch_add(1); }
WarningSilencer::~WarningSilencer() { silencers.fetch_sub(1); }

void set_warnings_on_stderr(bool on) { g_warnings_on_stderr.store(on); }

void warn(const std::string& message) {
  if (silencers.load() > 0) return;
  if (g_warnings_on_stderr.load()) {
    // After what stdout holds so far: in a file both go to (`> log 2>&1`), a warning came out
    // before the lines printed ahead of it.
    std::fflush(stdout);
    fmt::print(stderr, "mantissa: warning: {}\n", message);
  }
  Recorders& r = recorders();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (WarningRecorder* rec : r.live) rec->messages_.push_back(message);
}

WarningRecorder::WarningRecorder() {
  Recorders& r = recorders();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live.push_back(this);
}

WarningRecorder::~WarningRecorder() {
  Recorders& r = recorders();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live.erase(std::remove(r.live.begin(), r.live.end(), this), r.live.end());
}

std::vector<std::string> WarningRecorder::messages() const {
  Recorders& r = recorders();
  std::lock_guard<std::mutex> lock(r.mutex);
  return messages_;
}

void warn_once(const std::string& message) {
  if (silencers.load() > 0) return;  // not said, so not said once either
  SaidOnce& s = said_once();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.said.insert(message).second) warn(message);
}

void forget_warnings_said_once() {
  SaidOnce& s = said_once();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.said.clear();
}

}  // namespace mantissa
