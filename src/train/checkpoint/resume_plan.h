#pragma once
// What a resume may change (docs/trainer.md, "What a resume may change"): the checkpoint's
// RunConfig and LR schedules are compared with the new run's before anything is restored.
// A change that would make the saved position or schedule meaningless is refused; one that
// can be applied is applied after the state is loaded, with a warning.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mantissa::train {

class Trainer;

struct ResumePlan {
  // Where the run continues in the epoch: the saved position, except that a checkpoint
  // written at the end of an epoch maps to the end of this run's (possibly longer or shorter)
  // epoch.
  int64_t batches_in_epoch = 0;
  // A changed learning rate to apply after loading: every param group's lr (no schedulers),
  // or every scheduler's base lrs (empty: nothing to apply).
  std::vector<double> group_lrs;
  std::vector<std::vector<double>> scheduler_base_lrs;
  // Changed hyper-parameters other than the lr to apply after loading: per param group, the
  // keys and this run's values (empty: nothing to apply).
  std::vector<nlohmann::json> group_options;
  std::vector<std::string> warnings;
};

// The optimizer steps automatic optimization takes in an epoch of `batches` batches with
// accumulate_grad_batches `accumulate` (a step every `accumulate` batches and on the epoch's last
// batch), and in its first `trained` batches (an epoch's end counts as all of them).
int64_t optimizer_steps_per_epoch(int64_t batches, int64_t accumulate);
int64_t optimizer_steps_after(int64_t trained, int64_t batches, int64_t accumulate);

// meta: the checkpoint's "mantissa.trainer" object; saved_schedulers: its "lr_schedulers",
// already checked to match the trainer's in number and kind. A checkpoint without "run"
// (written before it existed) has only its schedules checked. Throws mantissa::Error naming
// the file, what differs and what to do. Position fields that contradict each other (global_step
// against epoch, batches_in_epoch and the batches per epoch, as the Trainer counts its steps)
// are refused as damage, naming them and their values.
ResumePlan plan_resume(const Trainer& trainer, const nlohmann::json& meta, int64_t saved_epoch,
                       int64_t saved_batches, const nlohmann::json& saved_schedulers,
                       const std::string& source);

// After the checkpoint's state is loaded: applies a changed learning rate and other changed
// optimizer hyper-parameters.
void apply_resume_plan(Trainer& trainer, const ResumePlan& plan);

// Prints the plan's warnings ("mantissa: warning: ...") to stderr.
void print_resume_warnings(const ResumePlan& plan);

}  // namespace mantissa::train
