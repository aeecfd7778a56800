#include "mantissa/train/report/profiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"

namespace mantissa::train {

void Profiler::describe() const { fmt::print("{}", summary()); }

SimpleProfiler::SimpleProfiler(SimpleProfilerOptions options) : options_(std::move(options)) {}

void SimpleProfiler::setup() {
  if (depth_++ > 0) return;
  setup_time_ = Clock::now();
  if (options_.op_families) {
    profiling::reset_op_times();
    profiling::set_op_timing(true);
  }
}

void SimpleProfiler::teardown() {
  if (depth_ == 0 || --depth_ > 0) return;
  profiled_seconds_ += std::chrono::duration<double>(Clock::now() - setup_time_).count();
  if (!options_.op_families) return;
  profiling::set_op_timing(false);
  for (const auto& [key, t] : profiling::op_times()) {
    profiling::OpTime& mine = op_times_[key];
    mine.calls += t.calls;
    mine.seconds += t.seconds;
  }
  profiling::reset_op_times();
}

void SimpleProfiler::start(const std::string& action) {
  // A start without its stop (an exception unwound past it) is restarted: only completed
  // intervals count.
  open_[action] = Clock::now();
}

void SimpleProfiler::stop(const std::string& action) {
  auto it = open_.find(action);
  MANTISSA_CHECK(it != open_.end(), "SimpleProfiler",
                 "stop('{}') without a matching start: actions must be started before they stop",
                 action);
  ActionTime& r = recorded_[action];
  r.action = action;
  ++r.calls;
  r.total_seconds += std::chrono::duration<double>(Clock::now() - it->second).count();
  open_.erase(it);
}

std::vector<ActionTime> SimpleProfiler::actions() const {
  std::vector<ActionTime> out;
  for (const auto& [name, r] : recorded_) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [](const ActionTime& a, const ActionTime& b) {
    return a.total_seconds > b.total_seconds;
  });
  return out;
}

namespace {

std::string rule(size_t width) { return std::string(width, '-') + "\n"; }

std::string row(const std::string& name, double mean, int64_t calls, double total, double share) {
  return fmt::format("| {:<58} | {:>12.6f} | {:>9} | {:>11.4f} | {:>7.2f} |\n", name, mean, calls,
                     total, share);
}

std::string header(const std::string& first) {
  return fmt::format("| {:<58} | {:>12} | {:>9} | {:>11} | {:>7} |\n", first, "mean (s)", "calls",
                     "total (s)", "%");
}

}  // namespace

std::string SimpleProfiler::summary() const {
  const double whole = profiled_seconds_ > 0 ? profiled_seconds_ : 0;
  auto share = [&](double s) { return whole > 0 ? 100.0 * s / whole : 0.0; };
  const size_t width = 113;
  std::string out = "Profiler report (SimpleProfiler)\n" + rule(width);
  out += header("Action");
  out += rule(width);
  out += row("Total", whole, 1, whole, 100.0);
  // Hooks that do nothing take microseconds: those under 0.01% of the run are summed in one
  // line, so the report stays readable (actions() has them all).
  int64_t hidden = 0, hidden_calls = 0;
  double hidden_seconds = 0;
  for (const ActionTime& a : actions()) {
    if (whole > 0 && share(a.total_seconds) < 0.01) {
      ++hidden;
      hidden_calls += a.calls;
      hidden_seconds += a.total_seconds;
      continue;
    }
    std::string name = a.action.size() > 58 ? a.action.substr(0, 55) + "..." : a.action;
    out += row(name, a.total_seconds / static_cast<double>(a.calls), a.calls, a.total_seconds,
               share(a.total_seconds));
  }
  if (hidden > 0) {
    out += row(fmt::format("({} more actions, each under 0.01%)", hidden),
               hidden_seconds / static_cast<double>(hidden_calls), hidden_calls, hidden_seconds,
               share(hidden_seconds));
  }
  out += rule(width);
  if (!op_times_.empty()) {
    std::vector<std::pair<std::string, profiling::OpTime>> ops;
    double in_ops = 0;
    for (const auto& [key, t] : op_times_) {
      ops.emplace_back(key.first + " " + key.second, t);
      in_ops += t.seconds;
    }
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.second.seconds > b.second.seconds;
    });
    out += fmt::format("Op families (outermost op only; {:.4f} s in ops, {:.1f}% of the run)\n",
                       in_ops, share(in_ops));
    out += rule(width);
    out += header("Op family");
    out += rule(width);
    for (const auto& [name, t] : ops) {
      std::string shown = name.size() > 58 ? name.substr(0, 55) + "..." : name;
      out += row(shown, t.seconds / static_cast<double>(t.calls), t.calls, t.seconds,
                 share(t.seconds));
    }
    out += rule(width);
  }
  return out;
}

void SimpleProfiler::describe() const {
  if (options_.filename.empty()) {
    fmt::print("{}", summary());
    return;
  }
  const std::string path =
      options_.dirpath.empty() ? options_.filename : options_.dirpath + "/" + options_.filename;
  // Whole or not at all, every write checked (an ofstream's destructor writes its last buffer
  // unchecked).
  io::write_text_file_atomically(path, summary(), "SimpleProfiler");
}

std::shared_ptr<Profiler> make_profiler(const std::string& name) {
  if (name.empty() || name == "none") return nullptr;
  if (name == "simple") return std::make_shared<SimpleProfiler>();
  fail("Trainer", "unknown profiler '{}'; valid values are: simple (or none)", name);
}

}  // namespace mantissa::train
