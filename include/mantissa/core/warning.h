#pragma once
// User-facing warnings: one line on stderr, "mantissa: warning: <message>".
#include <string>
#include <vector>

namespace mantissa {

void warn(const std::string& message);

// Whether warnings go to stderr (the default); WarningRecorders see them either way. Off on
// the ranks other than 0 of a job (`mantissa train --devices N`): rank 0 warns for the job.
void set_warnings_on_stderr(bool on);

// The same, at most once per process for each distinct message: commands that run many
// trainings in one process (compare, bench) say a thing once, not once per run.
void warn_once(const std::string& message);

// Forgets which messages warn_once has said, so that each may be said once more. For tests:
// their order would otherwise decide which of them sees a once-a-process warning.
void forget_warnings_said_once();

// While one exists, warnings are neither printed nor recorded (nor counted as said by
// warn_once): for runs that repeat one the user has seen, such as compare's timing rounds,
// which would repeat the training run's warnings once per round.
class WarningSilencer {
 public:
  WarningSilencer();
  ~WarningSilencer();
  WarningSilencer(const WarningSilencer&) = delete;
  WarningSilencer& operator=(const WarningSilencer&) = delete;
};

// Records every warning said (by warn or warn_once) while it exists, besides printing it: a
// command whose reports outlive the terminal (compare's --html and --json) carries in them what
// the user was warned of on stderr. Recorders may nest; each sees every warning of its lifetime.
class WarningRecorder {
 public:
  WarningRecorder();
  ~WarningRecorder();
  WarningRecorder(const WarningRecorder&) = delete;
  WarningRecorder& operator=(const WarningRecorder&) = delete;

  // The messages in the order they were said (without the "mantissa: warning: " prefix).
  std::vector<std::string> messages() const;

 private:
  friend void warn(const std::string& message);
  std::vector<std::string> messages_;
};

}  // namespace mantissa
