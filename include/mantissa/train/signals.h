#pragma once
// Graceful interruption (Lightning's signal handling): SIGINT (Ctrl-C) and SIGTERM only set a
// flag; a running Trainer sees it after the current training batch, stops, writes
// last.safetensors through its ModelCheckpoint callbacks and returns from fit with
// interrupted() true. A second signal while the first is pending ends the process at once
// with _exit(128 + signal), for a run that does not stop soon enough.
//
// The signals are taken by a watcher thread: while installed, SIGINT/SIGTERM are blocked in the
// installing thread and the OpenMP compute threads (a signal landing inside a oneDNN JIT kernel
// would corrupt the heap; src/train/signals.cpp says why). So send them to the process
// (kill(getpid(), ...), a terminal's Ctrl-C), not to one thread: raise() stays pending until
// the handlers are removed, and is then forgotten.
//
// Nothing is installed by default: the `mantissa` command installs the handlers for a run,
// library users opt in the same way.
//
//   {
//     train::InterruptHandlers handlers;   // installs; the destructor restores the previous
//     trainer.fit(module, loader, &val);
//     if (trainer.interrupted()) { ... }
//   }
#include <optional>
#include <string>
#include <vector>

namespace mantissa::train {

// The signal received since the handlers were installed (or cleared), if any. Safe to call
// from any thread.
std::optional<int> pending_interrupt();
// Forgets a received signal (a later fit in the same process then runs normally).
void clear_pending_interrupt();
// Records `signal` as if it had been received (tests, or code that wants to stop a run the
// same way from another thread).
void request_interrupt(int signal);
// How a received signal is announced on stderr. kQuiet: not at all (ranks other than 0 of a
// job: rank 0 speaks for it). kLauncher: a SIGTERM is announced as an interrupt that may be a
// Ctrl-C (mpirun turns the Ctrl-C it receives into SIGTERM for every rank).
enum class InterruptMessages { kNormal, kLauncher, kQuiet };
void set_interrupt_messages(InterruptMessages messages);
// "SIGINT", "SIGTERM", or "a signal" for any other.
const char* signal_name(int signal);
// A launcher that starts the ranks through mpirun (`mantissa train --devices N`) and hands the
// stop signal it was sent on to mpirun, which signals every rank with SIGTERM whatever it got,
// writes that signal's number (decimal text) into the file at `path` first: a SIGTERM received
// while the file names SIGINT is taken as that SIGINT, so that the run's record and exit status
// are the Ctrl-C's (130), not SIGTERM's. Call before the handlers are installed; "" (the
// default) takes every signal as received.
void set_launcher_signal_file(const std::string& path);
// The signal the launcher's file names (SIGINT or SIGTERM), or nothing: no file set, or the
// launcher was sent no stop signal (mpirun ending the job on its own, e.g. after a rank died).
std::optional<int> launcher_signal();

// The set-up of a run (building the model, loading the data) can take minutes and holds nothing
// to save: while an ExitOnInterrupt is alive, a SIGINT or SIGTERM ends the process at once
// with exit status 128 + signal, saying "mantissa: interrupted by SIGTERM while <step>:
// stopped before training, nothing to save" (a signal already received when it is made does
// the same), instead of waiting for the Trainer's first check. Acts only while exactly one
// InterruptHandlers is alive (a single run); inside compare or bench, whose handlers are nested
// around several runs, the signal waits for the run's first check so that the command can still
// report the runs it finished. `step` must be a string literal ("building the model").
// `remove_if_empty`: directories the run made for outputs it writes later (io::
// NewDirectoryCleanup::made(), deepest first); before it exits, the signal removes those still
// empty, as the run takes them back when it fails (rmdir(2): a directory that holds anything
// stays, and so do its parents).
class ExitOnInterrupt {
 public:
  explicit ExitOnInterrupt(const char* step, std::vector<std::string> remove_if_empty = {});
  ~ExitOnInterrupt();
  ExitOnInterrupt(const ExitOnInterrupt&) = delete;
  ExitOnInterrupt& operator=(const ExitOnInterrupt&) = delete;

 private:
  const char* previous_ = nullptr;
  const char* const* previous_dirs_ = nullptr;
  std::vector<std::string> dirs_;
  std::vector<const char*> dir_names_;  // dirs_' strings, then nullptr: read by the signal
  bool active_ = false;
};

// Installs the SIGINT and SIGTERM handling (watcher thread, masks, fallback handler) while alive
// and restores the previous dispositions (and forgets a pending signal) when destroyed. Nestable:
// an instance made while another is alive does nothing, neither when made (a signal received
// stays pending) nor when destroyed, so a command that runs several trainings (compare, bench)
// installs them around all of them and a signal that lands between two runs, or after a run's
// last look at it, still stops the next one. Make and destroy them in one thread, innermost
// first.
class InterruptHandlers {
 public:
  InterruptHandlers();
  ~InterruptHandlers();
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;
};

}  // namespace mantissa::train
