#include "mantissa/io/stale_temporaries.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "mantissa/core/untrusted_text.h"

namespace mantissa::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMarker = ".safetensors.tmp.";

// The writer's pid from a temporary file's name, if the name has the writer's pattern.
std::optional<pid_t> writer_pid(const std::string& name) {
  const size_t at = name.rfind(kMarker);
  if (at == std::string::npos || at == 0) return std::nullopt;
  const std::string digits = name.substr(at + kMarker.size());
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  for (const char c : digits)
    if (c < '0' || c > '9') return std::nullopt;
  const long pid = std::stol(digits);
  if (pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

// When process `pid` started, in seconds since the epoch (Linux /proc), or nothing if unknown.
std::optional<double> process_start_time(pid_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');  // the command name may hold spaces and ')'
  if (comm_end == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(comm_end + 1));
  std::string field;
  // After the name: state is field 3 of stat(5); starttime is field 22.
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) return std::nullopt;
  const double ticks_after_boot = std::stod(field);

  std::ifstream proc_stat("/proc/stat");
  std::string key;
  long long boot_time = -1;
  while (proc_stat >> key) {
    if (key == "btime") {
      proc_stat >> boot_time;
      break;
    }
  }
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (boot_time < 0 || ticks_per_second <= 0) return std::nullopt;
  return static_cast<double>(boot_time) + ticks_after_boot / static_cast<double>(ticks_per_second);
}

double seconds_since_epoch(fs::file_time_type t) {
  const auto system = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration<double>(system.time_since_epoch()).count();
}

// The registered temporaries (TemporaryBeingWritten): fixed storage a signal handler may read.
// A slot is claimed (kFilling) by a compare-exchange, its path copied, then published (kSet).
enum SlotState : int { kFree = 0, kFilling = 1, kSet = 2 };
struct TemporarySlot {
  std::atomic<int> state{kFree};
  char path[TemporaryBeingWritten::kMaxTemporaryPathBytes];
};
static_assert(std::atomic<int>::is_always_lock_free, "read by a signal handler");
TemporarySlot g_temporaries[TemporaryBeingWritten::kMaxTemporariesBeingWritten];

bool writer_is_gone(pid_t pid, fs::file_time_type written) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A process holds that pid (or we may not signal it). It is the writer only if it started
  // before the file was last written; 2 s of slack covers boot time's 1 s resolution.
  const std::optional<double> started = process_start_time(pid);
  return started && seconds_since_epoch(written) < *started - 2.0;
}

}  // namespace

std::vector<std::string> remove_stale_safetensors_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::vector<fs::path> stale;  // listed first: the directory is not changed while iterating
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return removed;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& entry = *it;
    const std::optional<pid_t> pid = writer_pid(entry.path().filename().string());
    if (!pid || entry.is_symlink(ec) || !entry.is_regular_file(ec)) continue;
    const fs::file_time_type written = entry.last_write_time(ec);
    if (!ec && writer_is_gone(*pid, written)) stale.push_back(entry.path());
  }
  for (const fs::path& p : stale)
    if (fs::remove(p, ec)) removed.push_back(p.string());
  return removed;
}

void remove_and_name_stale_safetensors_temporaries(const std::string& dir, std::string_view what) {
  for (const std::string& path : remove_stale_safetensors_temporaries(dir))
    fmt::print(stderr, "mantissa: removed {}, left behind by an interrupted {}\n",
               quote_untrusted(path, TemporaryBeingWritten::kMaxTemporaryPathBytes), what);
}

TemporaryBeingWritten::TemporaryBeingWritten(const std::string& path) {
  if (path.size() >= kMaxTemporaryPathBytes) return;
  for (int i = 0; i < kMaxTemporariesBeingWritten; ++i) {
    int expected = kFree;
    if (!g_temporaries[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(g_temporaries[i].path, path.c_str(), path.size() + 1);
    g_temporaries[i].state.store(kSet, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TemporaryBeingWritten::~TemporaryBeingWritten() {
  if (slot_ >= 0) g_temporaries[slot_].state.store(kFree, std::memory_order_release);
}

void remove_temporaries_being_written() noexcept {
  for (TemporarySlot& slot : g_temporaries)
    if (slot.state.load(std::memory_order_acquire) == kSet) ::unlink(slot.path);
}

}  // namespace mantissa::io
