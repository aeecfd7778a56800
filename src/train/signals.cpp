// SIGINT/SIGTERM handling. The signals are received by a watcher thread of our own (sigwait),
// never by a compute thread: while InterruptHandlers is alive they are blocked in the calling
// thread and in every OpenMP worker. Why: oneDNN's JIT GEMM kernels point rsp at a heap
// workspace while they run (oneDNN issue #4845), so a signal frame pushed onto such a thread
// overwrites heap memory: batches with garbage targets, crashes. The sigaction handler stays
// installed for threads we do not know of; it and the watcher do only async-signal-safe work
// (a lock-free atomic exchange, write(2), unlink(2), _exit(2)). Stopping the loop and saving
// happen in the Trainer when it next looks at the flag.
#include "mantissa/train/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "mantissa/core/error.h"
#include "mantissa/io/stale_temporaries.h"

namespace mantissa::train {
namespace {

static_assert(std::atomic<int>::is_always_lock_free,
              "the signal flag must be a lock-free atomic to be touched in a handler");

std::atomic<int> g_signal{0};  // 0: none received
std::atomic<int> g_depth{0};   // InterruptHandlers alive (nested ones count; the outermost acts)
std::atomic<bool> g_stop_watcher{false};
std::atomic<int> g_messages{0};  // an InterruptMessages
// What the run is doing while an ExitOnInterrupt is alive ("building the model"); nullptr
// otherwise. The strings are literals, so a handler may read them at any time.
std::atomic<const char*> g_setup_step{nullptr};
// The directories an ExitOnInterrupt takes back while still empty, a nullptr-terminated array
// (deepest first); nullptr for none.
std::atomic<const char* const*> g_setup_dirs{nullptr};
struct sigaction g_previous_int, g_previous_term;
sigset_t g_previous_mask;  // the installing thread's, restored by the destructor
std::thread g_watcher;

void write_stderr(const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

template <size_t N>
void write_stderr(const char (&text)[N]) {
  write_stderr(text, N - 1);
}

int64_t monotonic_ns() {  // async-signal-safe (clock_gettime is)
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// A second copy of the same signal this soon after the first is one request delivered twice:
// GNU timeout signals the command and then its whole process group, kill -TERM -PGID reaches
// every process of a group. A person interrupting again takes longer than this.
constexpr int64_t kSameRequestNs = 100 * 1000000;
std::atomic<int64_t> g_first_signal_ns{0};

// Ends the process for a signal received during set-up (ExitOnInterrupt): nothing is trained
// yet, so nothing is saved. Async-signal-safe (write(2), _exit(2)).
[[noreturn]] void exit_during_setup(int signal, const char* step) {
  if (g_messages.load() != static_cast<int>(InterruptMessages::kQuiet)) {
    write_stderr("\nmantissa: interrupted by ");
    const char* name = signal_name(signal);
    write_stderr(name, std::strlen(name));
    write_stderr(" while ");
    write_stderr(step, std::strlen(step));
    write_stderr(": stopped before training, nothing to save\n");
  }
  if (const char* const* dirs = g_setup_dirs.load()) {
    for (; *dirs != nullptr; ++dirs) ::rmdir(*dirs);
  }
  ::_exit(128 + signal);
}

// set_launcher_signal_file's path, NUL-terminated ("" for none); written before the handlers
// are installed, read by them.
char g_launcher_signal_file[4096] = {0};

// The signal number in the launcher's file, 0 when there is none. Async-signal-safe (open(2),
// read(2), close(2)).
int read_launcher_signal() {
  if (g_launcher_signal_file[0] == '\0') return 0;
  const int fd = ::open(g_launcher_signal_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[16];
  const ssize_t n = ::read(fd, text, sizeof text);
  ::close(fd);
  int signal = 0;
  for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9' && signal < 1000; ++i)
    signal = signal * 10 + (text[i] - '0');
  return signal;
}

// The signal a person sent: mpirun hands the launcher's SIGINT on as SIGTERM.
int as_sent(int signal) {
  return signal == SIGTERM && read_launcher_signal() == SIGINT ? SIGINT : signal;
}

void record_signal(int received) {
  const int signal = as_sent(received);
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signal)) {
    if (expected == signal && monotonic_ns() - g_first_signal_ns.load() < kSameRequestNs) return;
    if (g_messages.load() != static_cast<int>(InterruptMessages::kQuiet))
      write_stderr("\nmantissa: second interrupt: exiting now without saving\n");
    // A file being written (the final model, a checkpoint) is left as it was, without its
    // temporary, which made the next run's output directory look not empty.
    io::remove_temporaries_being_written();
    ::_exit(128 + signal);
  }
  g_first_signal_ns.store(monotonic_ns());
  if (const char* step = g_setup_step.load()) exit_during_setup(signal, step);
  const int messages = g_messages.load();
  if (messages == static_cast<int>(InterruptMessages::kQuiet)) return;
  if (signal == SIGTERM && messages == static_cast<int>(InterruptMessages::kLauncher)) {
    write_stderr(
        "\nmantissa: interrupted (SIGTERM from the launcher, e.g. Ctrl-C): finishing the current "
        "step, then stopping (interrupt again to exit at once)\n");
  } else if (signal == SIGTERM) {
    write_stderr(
        "\nmantissa: termination requested (SIGTERM): finishing the current step, then stopping "
        "(signal again to exit at once)\n");
  } else {
    write_stderr(
        "\nmantissa: interrupt received: finishing the current step, then stopping (interrupt "
        "again to exit at once)\n");
  }
}

extern "C" void on_interrupt_signal(int signal) { record_signal(signal); }

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Applies `how` (SIG_BLOCK / SIG_UNBLOCK) to the signals in the calling thread and in each
// thread of an OpenMP team of the current size, the threads that run kernels. Threads that
// OpenMP creates later inherit the mask of the thread that starts the region (blocked too).
void mask_in_compute_threads(int how, const sigset_t& set) {
#pragma omp parallel
  pthread_sigmask(how, &set, nullptr);
  pthread_sigmask(how, &set, nullptr);
}

// Waits for the blocked signals; wakes every 50 ms to see whether it should stop.
void watch_signals() {
  const sigset_t set = interrupt_signals();
  const timespec period{0, 50'000'000};
  while (!g_stop_watcher.load()) {
    const int signal = sigtimedwait(&set, nullptr, &period);
    if (signal > 0) record_signal(signal);
  }
}

}  // namespace

std::optional<int> pending_interrupt() {
  const int s = g_signal.load();
  if (s == 0) return std::nullopt;
  return s;
}

void clear_pending_interrupt() { g_signal.store(0); }

void request_interrupt(int signal) {
  MANTISSA_CHECK(signal > 0, "request_interrupt", "signal must be positive, got {}", signal);
  g_signal.store(signal);
}

void set_interrupt_messages(InterruptMessages messages) {
  g_messages.store(static_cast<int>(messages));
}

void set_launcher_signal_file(const std::string& path) {
  MANTISSA_CHECK(path.size() < sizeof g_launcher_signal_file, "set_launcher_signal_file",
                 "the path is {} bytes long, at most {} fit", path.size(),
                 sizeof g_launcher_signal_file - 1);
  std::memcpy(g_launcher_signal_file, path.c_str(), path.size() + 1);
}

std::optional<int> launcher_signal() {
  const int signal = read_launcher_signal();
  if (signal != SIGINT && signal != SIGTERM) return std::nullopt;
  return signal;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

ExitOnInterrupt::ExitOnInterrupt(const char* step, std::vector<std::string> remove_if_empty)
    : dirs_(std::move(remove_if_empty)) {
  // Inside a command that runs several trainings (compare, bench: handlers nested), a signal
  // waits for the run's first check, so that the command still reports the runs it finished.
  if (g_depth.load() != 1) return;
  for (const std::string& dir : dirs_) dir_names_.push_back(dir.c_str());
  dir_names_.push_back(nullptr);
  previous_dirs_ = g_setup_dirs.exchange(dir_names_.data());
  previous_ = g_setup_step.exchange(step);
  active_ = true;
  // A signal received before (while the options were checked) stops the run here.
  if (const int pending = g_signal.load(); pending != 0) exit_during_setup(pending, step);
}

ExitOnInterrupt::~ExitOnInterrupt() {
  if (!active_) return;
  g_setup_step.store(previous_);
  g_setup_dirs.store(previous_dirs_);
}

InterruptHandlers::InterruptHandlers() {
  // Nested (a run inside a command that installed them for all its runs: compare, bench): the
  // handlers are in place, and a signal already received stays pending for the outer scope.
  if (g_depth.fetch_add(1) > 0) return;
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_interrupt_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // file I/O in progress continues instead of failing (EINTR)
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_BLOCK, nullptr, &g_previous_mask);
  mask_in_compute_threads(SIG_BLOCK, set);
  g_stop_watcher.store(false);
  g_watcher = std::thread(watch_signals);  // inherits the blocked mask, as sigwait requires
}

InterruptHandlers::~InterruptHandlers() {
  if (g_depth.fetch_sub(1) > 1) return;  // an inner one: the outermost restores
  g_stop_watcher.store(true);
  g_watcher.join();
  // A signal arriving while unblocking goes to the handler, still installed, and is then
  // forgotten below like any pending one.
  sigset_t unblock = interrupt_signals();
  if (sigismember(&g_previous_mask, SIGINT) == 1) sigdelset(&unblock, SIGINT);
  if (sigismember(&g_previous_mask, SIGTERM) == 1) sigdelset(&unblock, SIGTERM);
  mask_in_compute_threads(SIG_UNBLOCK, unblock);
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  g_signal.store(0);
}

}  // namespace mantissa::train
