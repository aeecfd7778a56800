// SIGINT/SIGTERM handling. The handler does only what is async-signal-safe: a lock-free atomic
// exchange, write(2) and _exit(2). Everything else (stopping the loop, saving) happens in the
// Trainer when it next looks at the flag.
#include "mantissa/train/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "mantissa/core/error.h"

namespace mantissa::train {
namespace {

static_assert(std::atomic<int>::is_always_lock_free,
              "the signal flag must be a lock-free atomic to be touched in a handler");

std::atomic<int> g_signal{0};  // 0: none received
std::atomic<bool> g_installed{false};
struct sigaction g_previous_int, g_previous_term;

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

extern "C" void on_interrupt_signal(int signal) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signal)) {
    write_stderr("\nmantissa: second interrupt: exiting now without saving\n");
    ::_exit(128 + signal);
  }
  write_stderr(
      "\nmantissa: interrupt received: finishing the current step and saving a checkpoint "
      "(interrupt again to exit at once)\n");
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

InterruptHandlers::InterruptHandlers() {
  MANTISSA_CHECK(!g_installed.exchange(true), "InterruptHandlers",
                 "the interrupt handlers are already installed (one InterruptHandlers at a time)");
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_interrupt_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // file I/O in progress continues instead of failing (EINTR)
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptHandlers::~InterruptHandlers() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  g_signal.store(0);
  g_installed.store(false);
}

}  // namespace mantissa::train
