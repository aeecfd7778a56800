#include "distributed_launch.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "exit_status.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/train/signals.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
static_assert(kCollectiveTimeoutExitStatus == dist::kCollectiveTimeoutExitStatus);

namespace {

std::vector<std::string>& recorded_args() {
  static std::vector<std::string> args;
  return args;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Oversubscription allowed by --devices: a 2-core machine may run 8 ranks, not more.
constexpr int64_t kMaxRanksPerCore = 4;

// The launcher's child (mpirun) and the last stop signal the launcher was sent, for the handler.
volatile pid_t launched_mpirun = 0;
volatile std::sig_atomic_t stop_signal = 0;

// Set by the launcher for the ranks it starts: it announces the interrupts it hands on itself.
constexpr const char* kLauncherEnv = "MANTISSA_DEVICES_LAUNCHER";
// Set by the launcher for the ranks it starts: the file it writes the stop signal it was sent
// into (train::set_launcher_signal_file), open in the launcher as signal_record_fd.
constexpr const char* kSignalFileEnv = "MANTISSA_DEVICES_SIGNAL_FILE";
volatile int signal_record_fd = -1;

void write_stderr(const char* text) {
  size_t size = std::strlen(text);
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

// A stop signal sent to the launcher (a Ctrl-C at the terminal, `kill`, `timeout`) goes to
// mpirun once, which stops the ranks after their current step (docs/distributed.md). The
// launcher says so: it alone knows that the SIGTERM its ranks get from mpirun is a person's
// stop (rank 0 called every SIGTERM "from the launcher, e.g. Ctrl-C", also the one mpirun sends
// when another rank died). Async-signal-safe: write(2), kill(2), fixed strings.
void forward_stop_signal(int signal) {
  const bool first = stop_signal == 0;
  stop_signal = signal;
  if (first) {
    write_stderr(signal == SIGINT    ? "\nmantissa: interrupted (SIGINT, e.g. Ctrl-C): the ranks "
                                       "finish the current step, then stop (interrupt again to "
                                       "exit at once)\n"
                 : signal == SIGTERM ? "\nmantissa: termination requested (SIGTERM): the ranks "
                                       "finish the current step, then stop (signal again to exit "
                                       "at once)\n"
                                     : "\nmantissa: hangup (SIGHUP): the ranks finish the current "
                                       "step, then stop (signal again to exit at once)\n");
  }
  // mpirun signals every rank with SIGTERM whatever it got: the ranks read the signal sent here
  // from the file, written before mpirun hears of it.
  if (first && signal_record_fd >= 0) {
    char text[4] = {static_cast<char>('0' + signal / 10 % 10), static_cast<char>('0' + signal % 10),
                    '\n', '\0'};
    (void)!::pwrite(signal_record_fd, text, 3, 0);
  }
  if (launched_mpirun > 0) ::kill(launched_mpirun, signal);
}

// The file of kSignalFileEnv: made empty for the job, removed when it ends.
class SignalRecordFile {
 public:
  SignalRecordFile() {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
            "/mantissa-devices-signal-XXXXXX";
    signal_record_fd = ::mkstemp(path_.data());
    if (signal_record_fd < 0) {
      path_.clear();  // the ranks then record the SIGTERM mpirun sends them
      return;
    }
    ::setenv(kSignalFileEnv, path_.c_str(), 1);
  }
  ~SignalRecordFile() {
    if (path_.empty()) return;
    ::unlink(path_.c_str());
    ::close(signal_record_fd);
    signal_record_fd = -1;
  }
  SignalRecordFile(const SignalRecordFile&) = delete;
  SignalRecordFile& operator=(const SignalRecordFile&) = delete;

 private:
  std::string path_;
};

// Runs cmd (mpirun and its arguments) as a child in a process group of its own and waits for it.
// Its own group: a Ctrl-C at the terminal reaches the launcher alone, which hands it on once
// (mpirun in the terminal's group would get it twice, from the terminal and from the launcher,
// and take the second as "kill the ranks now"); --stdin none keeps mpirun, then a background
// group, from reading the terminal. Returns the exit status the job ends with: 128 + the signal
// when the launcher was stopped by one and the job did not finish cleanly (130 for a Ctrl-C, as a
// single-process run), else mpirun's.
int run_mpirun(std::vector<std::string> cmd, const char* command) {
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  // Stop signals wait until the child is known, so none arrives with nowhere to go.
  sigset_t stops, before;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
  ::sigprocmask(SIG_BLOCK, &stops, &before);
  const std::string exec_failed =
      fmt::format("mantissa: error: [{}] could not start {}\n", command, cmd[0]);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    // A launcher that dies (SIGKILL) takes the job with it, as exec did.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ::execv(argv[0], argv.data());
    // Between fork and exec only async-signal-safe calls: the message is built before the fork.
    (void)!::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    ::_exit(2);
  }
  if (child < 0) {
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    fail(command, "could not start {}: {}", cmd[0], std::strerror(errno));
  }
  launched_mpirun = child;
  struct sigaction forward {};
  forward.sa_handler = forward_stop_signal;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &forward, nullptr);
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int job = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stop_signal != 0 && job != 0) return 128 + static_cast<int>(stop_signal);
  // 2, 3, 4 and 5 are a rank's own endings (mantissa's error, an internal one, a diverged run,
  // a collective timeout), already printed by that rank. Anything else (a rank killed by a signal,
  // mpirun failing to start the ranks) Open MPI would explain in a banner that --quiet leaves out:
  // say it here.
  if (job != 0 && job != kErrorExitStatus && job != kInternalErrorExitStatus &&
      job != kDivergedExitStatus && job != kCollectiveTimeoutExitStatus) {
    const std::string what =
        job > 128 && job < 128 + NSIG
            ? fmt::format("a rank was killed by signal {} ({})", job - 128, ::strsignal(job - 128))
            : fmt::format("mpirun exited with status {}", job);
    fmt::print(stderr, "mantissa: error: [{}] the job of --devices failed: {}\n", command, what);
  }
  return job;
}

}  // namespace

void remember_command_line(int argc, char** argv) { recorded_args().assign(argv, argv + argc); }

const std::vector<std::string>& recorded_command_line() { return recorded_args(); }

void relaunch_under_mpirun_if_needed(const TrainOptions& o, const char* command) {
  // One device per process: N independent full runs are not what either flag asks for.
  MANTISSA_CHECK(o.devices <= 1 || o.strategy != "single_device", command,
                 "--strategy single_device trains in one process, but --devices {} asks for {} "
                 "ranks: drop --strategy single_device (--devices {} trains with ddp) or "
                 "--devices",
                 o.devices, o.devices, o.devices);
  if (o.devices <= 1 || dist::launched_by_mpi()) return;
  // Every rank starts on this machine: far more ranks than cores only thrash it (and a huge
  // count would start processes until the machine gives out). Tests and experiments may
  // oversubscribe a little; jobs over several machines are started with mpirun itself.
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  MANTISSA_CHECK(o.devices <= kMaxRanksPerCore * cores, command,
                 "--devices {} would start {} ranks on this machine's {} cores (at most {} per "
                 "core): use fewer, or start a job over several machines with `mpirun -np N "
                 "--hostfile FILE mantissa {} ...` (docs/distributed.md)",
                 o.devices, o.devices, cores, kMaxRanksPerCore, command);
  MANTISSA_CHECK(dist::mpi_compiled(), command, "{}",
                 dist::mpi_missing_message("--devices " + std::to_string(o.devices)));
  const std::string mpirun = find_on_path("mpirun");
  MANTISSA_CHECK(!mpirun.empty(), command,
                 "--devices {} starts the ranks with mpirun, which is not on PATH: install "
                 "openmpi-bin (scripts/setup.sh), or start the job yourself with `mpirun -np {} "
                 "mantissa {} ...`",
                 o.devices, o.devices, command);
  const auto& args = recorded_args();
  MANTISSA_CHECK(!args.empty(), command,
                 "--devices needs the command line (remember_command_line)");
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) self = args[0];
  // Open MPI refuses root without these two (containers and CI run as root), and a machine
  // with fewer cores than ranks needs --oversubscribe.
  ::setenv(kLauncherEnv, "1", 1);
  // mpirun gives the ranks a pseudo-terminal as stdout whatever the launcher's is: they ask this
  // instead (core/terminal.h), so a log file gets no progress-bar redraws.
  ::setenv("MANTISSA_STDOUT_IS_TTY", ::isatty(STDOUT_FILENO) == 1 ? "1" : "0", 1);
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  // Without --threads, the cores are shared out between the ranks.
  if (o.threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned per_rank = std::max<unsigned>(1, cores / static_cast<unsigned>(o.devices));
    ::setenv("OMP_NUM_THREADS", std::to_string(per_rank).c_str(), 1);
  }
  // --quiet: Open MPI's help banners ("MPI_ABORT was invoked on rank 1 ...") are left out; a
  // failing rank prints its own reason, and run_mpirun names an ending it cannot explain.
  std::vector<std::string> cmd = {
      mpirun, "--quiet", "--oversubscribe",         "--bind-to", "none", "--stdin",
      "none", "-np",     std::to_string(o.devices), self};
  cmd.insert(cmd.end(), args.begin() + 1, args.end());
  int status = 0;
  {
    const SignalRecordFile signal_file;
    status = run_mpirun(std::move(cmd), command);
  }
  std::exit(status);
}

bool& quiet_rank() {
  static bool quiet = false;
  return quiet;
}

bool is_quiet_rank() { return quiet_rank(); }

void refuse_multi_rank_job(const char* command) {
  if (!dist::launched_by_mpi() || dist::launcher_world_size() <= 1) return;
  fail(command,
       "`mantissa {}` runs in one process, but mpirun started it as {} ranks: run it without "
       "mpirun (data-parallel training is `mantissa train --devices N`, docs/distributed.md)",
       command, dist::launcher_world_size());
}

int quiet_non_zero_ranks() {
  if (!dist::launched_by_mpi() || dist::launcher_world_size() <= 1) return 0;
  const int rank = dist::world()->rank();
  if (const char* file = std::getenv(kSignalFileEnv)) train::set_launcher_signal_file(file);
  if (rank != 0) {
    std::fflush(stdout);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
    // Rank 0 warns and announces an interrupt for the job; the others would say it again.
    set_warnings_on_stderr(false);
    train::set_interrupt_messages(train::InterruptMessages::kQuiet);
    quiet_rank() = true;
  } else if (std::getenv(kLauncherEnv) != nullptr) {
    // Started by --devices: the launcher announced the interrupt it handed on. A SIGTERM it did
    // not hand on is mpirun ending the job (a rank died), which the launcher names at the end.
    train::set_interrupt_messages(train::InterruptMessages::kQuiet);
  } else {
    // mpirun turns a Ctrl-C into SIGTERM for every rank: rank 0 does not call it a termination.
    train::set_interrupt_messages(train::InterruptMessages::kLauncher);
  }
  return rank;
}

}  // namespace mantissa::app
