"""Runs one command of the sweep under a time limit and an address-space cap, and says how it ended.

Each command runs in its own process group (so that a timeout also ends what it started, such
as mpirun's ranks), niced, with RLIMIT_AS set: a run that keeps allocating ends at the cap
instead of taking the machine. The peak resident size comes from wait4's rusage.
"""

import os
import resource
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass

# Text that only a crash or a sanitizer report prints.
CRASH_MARKERS = (
    "AddressSanitizer", "UndefinedBehaviorSanitizer", "LeakSanitizer", "runtime error:",
    "terminate called", "Segmentation fault", "Assertion `", "stack smashing", "double free",
    "free(): invalid", "malloc(): ", "corrupted size", "core dumped",
)


@dataclass
class Outcome:
    argv: list
    returncode: int  # negative: killed by that signal
    timed_out: bool
    seconds: float
    peak_rss_mb: float
    output: str  # stdout and stderr together, at most the last 20 KB

    @property
    def signal(self):
        return -self.returncode if self.returncode < 0 else None

    def crash_marker(self):
        for marker in CRASH_MARKERS:
            if marker in self.output:
                return marker
        return None

    def command(self, env_prefix=""):
        return env_prefix + " ".join(shlex.quote(a) for a in self.argv)


def run(argv, timeout_s=20.0, mem_mb=4096, cwd=None, stdin_data=None, env=None) -> Outcome:
    """Runs ARGV; at TIMEOUT_S the whole process group gets SIGKILL and timed_out is set."""

    def limits():
        os.setsid()
        os.nice(10)
        cap = mem_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    start = time.monotonic()
    out_path = os.path.join(cwd or ".", f".sweep-out-{os.getpid()}")
    with open(out_path, "w+b") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_data is not None else
                                subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=limits, cwd=cwd, env=env)
        if stdin_data is not None:
            try:
                proc.stdin.write(stdin_data)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        timed_out = False
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.monotonic() - start > timeout_s:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        # Whatever the command left behind in its group (it may have detached children).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out.seek(0, os.SEEK_END)
        size = out.tell()
        out.seek(max(0, size - 20000))
        text = out.read().decode("utf-8", "replace")
    os.unlink(out_path)
    return Outcome(list(argv), proc.returncode, timed_out, seconds, usage.ru_maxrss / 1024.0, text)


def exit_kind(outcome: Outcome, mem_mb: int):
    """crash, unbounded (timeout, or the memory cap reached), accepted (0) or rejected."""
    if outcome.timed_out:
        return "unbounded"
    if outcome.peak_rss_mb >= 0.5 * mem_mb:
        return "unbounded"
    if outcome.signal is not None or outcome.returncode >= 128 or outcome.crash_marker():
        return "crash"
    return "accepted" if outcome.returncode == 0 else "rejected"
