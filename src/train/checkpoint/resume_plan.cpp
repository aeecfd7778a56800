// The resume rules. Each option's rule and why:
//  - training data (dataset size, batch size, shuffle, shuffle seed, drop_last): the saved
//    position is "b batches into epoch e's order"; with other data that is other examples, so
//    a mid-epoch checkpoint is refused. At an epoch boundary nothing depends on it: warn, apply.
//  - a checkpoint written inside a gradient-accumulation window: the window's gradients are not
//    in it, so the window cannot be continued as the first run did: refuse.
//  - batches per epoch (limit_train_batches) alone: the order is the same, so the position
//    still holds: warn, apply.
//  - seed: the checkpoint's generator state is restored (it is what makes a resume bit-exact),
//    so a new seed changes nothing: warn that the saved state wins.
//  - learning rate: warn, apply (the optimizer's lr, or every scheduler's base lr so the
//    schedule keeps its shape at the new height).
//  - the optimizer's other hyper-parameters (weight_decay, betas, eps, momentum, ...): loading
//    its state restores the checkpoint's (as torch.optim's load_state_dict does), which dropped
//    a changed value in silence: warn, apply this run's.
//  - LR schedule hyper-parameters (T_max, step_size, ...): the resumed run would follow
//    neither the old nor the new schedule: refuse.
#include "train/checkpoint/resume_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/train/checkpoint/run_config.h"
#include "mantissa/train/train_module.h"
#include "mantissa/train/trainer.h"
#include "train/checkpoint/checkpoint_fields.h"

namespace mantissa::train {
namespace {

constexpr const char* kWhere = "checkpoint";

std::string seed_text(const std::optional<uint64_t>& seed) {
  return seed ? std::to_string(*seed) : std::string("unset");
}

// "batch size 32 -> 64", ... for every loader setting that differs.
std::vector<std::string> data_differences(const RunConfig& saved, const RunConfig& live) {
  std::vector<std::string> d;
  if (saved.dataset_size != live.dataset_size) {
    d.push_back(fmt::format("dataset size {} -> {}", saved.dataset_size, live.dataset_size));
  }
  if (saved.batch_size != live.batch_size) {
    d.push_back(fmt::format("batch size {} -> {}", saved.batch_size, live.batch_size));
  }
  if (saved.shuffle != live.shuffle) {
    d.push_back(fmt::format("shuffle {} -> {}", saved.shuffle, live.shuffle));
  } else if (saved.shuffle && saved.loader_seed != live.loader_seed) {
    d.push_back(fmt::format("shuffle seed {} -> {}", saved.loader_seed, live.loader_seed));
  }
  if (saved.drop_last != live.drop_last) {
    d.push_back(fmt::format("drop_last {} -> {}", saved.drop_last, live.drop_last));
  }
  return d;
}

void check_schedules(const Trainer& trainer, const nlohmann::json& saved,
                     const std::string& source) {
  const auto& live = trainer.lr_schedulers();
  for (size_t i = 0; i < live.size() && i < saved.size(); ++i) {
    // The settings alone: a running state (ReduceLROnPlateau's best, bad epochs, reduced lrs)
    // is what the checkpoint carries on, not a schedule to compare with a fresh one's.
    const nlohmann::json want = live[i].scheduler->settings();
    const nlohmann::json& got = saved[i];
    std::vector<std::string> diffs;
    for (auto it = want.begin(); it != want.end(); ++it) {
      const auto s = got.find(it.key());
      if (s == got.end() || *s != it.value()) {
        diffs.push_back(fmt::format("{} {} in the checkpoint, {} in this run", it.key(),
                                    s == got.end() ? "missing" : s->dump(), it.value().dump()));
      }
    }
    if (diffs.empty()) continue;
    fail(kWhere,
         "{}: LR scheduler {} ({}) has another schedule than the checkpoint's: {}. Continuing "
         "would follow neither schedule. Resume with the settings that gave the saved schedule "
         "(for a cosine schedule over the run: the same epochs, max steps, batch size, batch "
         "limit and accumulation), or start a new run from the weights",
         source, i, live[i].scheduler->name(), fmt::join(diffs, "; "));
  }
}

// The position's fields against each other (automatic optimization only: a manual
// training_step may step any number of times per batch). The Trainer steps every `a` batches and
// on an epoch's last batch, so global_step is the steps of the completed epochs plus
// optimizer_steps_after(batches_in_epoch) of the current one. The completed epochs each had
// ceil(n / a) steps, unless a resume changed the batches per epoch (limit_train_batches, the
// data, accumulate_grad_batches): such a run's checkpoints record their steps before the epoch
// ("steps_before_epoch"), and each completed epoch had at least one. `n` and `a` are the
// writer's (its "run" and "accumulate_grad_batches"; a file written before the latter was
// recorded passes if some accumulation in 1..n adds up).
void check_position(const Trainer& trainer, const nlohmann::json& meta, const RunConfig& saved,
                    int64_t epoch, int64_t batches, const std::string& source) {
  if (trainer.module() == nullptr || !trainer.module()->automatic_optimization) return;
  const CheckpointFields fields(meta, source);
  const int64_t global_step = fields.require_int("global_step", 0, kMaxCheckpointCount);
  const int64_t n = saved.num_training_batches;
  if (fields.has("steps_before_epoch")) {
    const int64_t a = fields.require_int("accumulate_grad_batches", 1, kMaxCheckpointCount);
    const int64_t before =
        fields.require_int("steps_before_epoch", -kMaxCheckpointCount, kMaxCheckpointCount);
    const int64_t in_epoch = optimizer_steps_after(batches, n, a);
    MANTISSA_CHECK(
        before + in_epoch == global_step && epoch <= global_step, kWhere,
        "{}: the checkpoint's position does not add up: global_step is {}, but "
        "steps_before_epoch {} + {} step(s) for the {} batch(es) trained in epoch {} "
        "(batches_in_epoch {} of {}, accumulate_grad_batches {}) make {}{}: the file is damaged",
        source, global_step, before, in_epoch, batches, epoch + 1, batches, n, a, before + in_epoch,
        epoch <= global_step
            ? ""
            : fmt::format(", and epoch {} says more epochs were completed than steps taken",
                          epoch));
    return;
  }
  const bool recorded = fields.has("accumulate_grad_batches");
  const int64_t live_a = trainer.options().accumulate_grad_batches;
  const int64_t a =
      recorded ? fields.require_int("accumulate_grad_batches", 1, kMaxCheckpointCount) : live_a;
  auto expected = [&](int64_t acc) {  // saturating: the counts come from the file
    int64_t steps = 0;
    if (__builtin_mul_overflow(epoch, optimizer_steps_per_epoch(n, acc), &steps) ||
        __builtin_add_overflow(steps, optimizer_steps_after(batches, n, acc), &steps))
      return std::numeric_limits<int64_t>::max();
    return steps;
  };
  if (expected(a) == global_step) return;
  // An older file: the accumulation it was written with is not known. The steps fall as it
  // grows (one above n counts as n): the smallest accumulation that gives at most global_step
  // steps is the one that can give exactly that many.
  if (!recorded && n > 1) {
    int64_t lo = 1, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (expected(mid) <= global_step) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    if (expected(lo) == global_step) return;
    // Such a file may also come from a run that a resume gave other batches per epoch, which
    // it did not record: refusing it as damaged could refuse a sound checkpoint. Said, not
    // refused; files that record their accumulation are checked exactly.
    warn(fmt::format(
        "{}: the checkpoint's position does not add up: global_step is {}, but epoch {} "
        "(completed epochs) and {} batch(es) trained in epoch {} (batches_in_epoch), at {} "
        "batches per epoch, make a different count for every accumulation; the file predates "
        "mantissa recording its accumulation, so a resume that changed the batches per epoch "
        "may explain it; resuming as it says (if the file was edited, use an earlier checkpoint)",
        source, global_step, epoch, batches, epoch + 1, n));
    return;
  }
  fail(kWhere,
       "{}: the checkpoint's position does not add up: global_step is {}, but epoch {} "
       "(completed epochs) x {} optimizer step(s) per epoch ({} batches, accumulate_grad_batches "
       "{}) + {} step(s) for the {} batch(es) trained in epoch {} (batches_in_epoch) make {}: the "
       "file is damaged",
       source, global_step, epoch, optimizer_steps_per_epoch(n, a), n, a,
       optimizer_steps_after(batches, n, a), batches, epoch + 1, expected(a));
}

std::string lrs_text(const std::vector<double>& lrs) {
  return fmt::format("{}", fmt::join(lrs, ", "));
}

// A changed learning rate: in the configured lrs, or in any scheduler's base lrs. The warning
// compares the peak lrs, the schedulers' base lrs when there are schedulers: the configured
// ones are what the schedulers' first factor made of them (a warm-up's first step: a tenth of
// the peak over 10 steps), not the lr the run was given.
void plan_lr(const Trainer& trainer, const std::optional<RunConfig>& saved,
             const nlohmann::json& saved_schedulers, int64_t global_step, ResumePlan& plan) {
  const RunConfig& live = trainer.run_config();
  bool changed = false;
  std::vector<double> old_lrs, new_lrs;
  if (saved && saved->configured_lrs.size() == live.configured_lrs.size() &&
      saved->configured_lrs != live.configured_lrs) {
    changed = true;
    old_lrs = saved->configured_lrs;
    new_lrs = live.configured_lrs;
  }
  bool base_changed = false;
  for (size_t i = 0; i < live.scheduler_base_lrs.size() && i < saved_schedulers.size(); ++i) {
    const auto base = saved_schedulers[i].find("base_lrs");
    if (base == saved_schedulers[i].end() || !base->is_array()) continue;  // the loader refuses
    std::vector<double> saved_base;
    for (const auto& v : *base) saved_base.push_back(v.is_number() ? v.get<double>() : NAN);
    if (saved_base.size() == live.scheduler_base_lrs[i].size() &&
        saved_base != live.scheduler_base_lrs[i]) {
      changed = true;
      if (!base_changed) {
        old_lrs = saved_base;
        new_lrs = live.scheduler_base_lrs[i];
      }
      base_changed = true;
    }
  }
  if (!changed) return;
  if (live.scheduler_base_lrs.empty()) {
    plan.group_lrs = live.configured_lrs;
  } else {
    plan.scheduler_base_lrs = live.scheduler_base_lrs;
  }
  plan.warnings.push_back(fmt::format(
      "the learning rate was {} in the checkpoint and is {} in this run: applying {} from step "
      "{} on{}",
      lrs_text(old_lrs), lrs_text(new_lrs), lrs_text(new_lrs), global_step,
      live.scheduler_base_lrs.empty() ? "" : " (as the LR schedulers' base, keeping their shape)"));
}

// Changed optimizer hyper-parameters other than the lr, group by group, key by key (a key one
// side lacks is not compared: an optimizer of another kind is refused by the loader).
void plan_group_options(const Trainer& trainer, const std::optional<RunConfig>& saved,
                        int64_t global_step, ResumePlan& plan) {
  const RunConfig& live = trainer.run_config();
  if (!saved || saved->configured_group_options.size() != live.configured_group_options.size())
    return;
  const bool several = live.configured_group_options.size() > 1;
  for (size_t g = 0; g < live.configured_group_options.size(); ++g) {
    const nlohmann::json& was = saved->configured_group_options[g];
    const nlohmann::json& now = live.configured_group_options[g];
    nlohmann::json changed = nlohmann::json::object();
    std::vector<std::string> texts;
    for (auto it = now.begin(); it != now.end(); ++it) {
      // The stochastic-rounding stream continues the checkpoint's, as the generators do when
      // the seed changes (the CLI derives rounding_seed from --seed).
      if (it.key() == "rounding_seed") continue;
      const auto old = was.find(it.key());
      if (old == was.end() || *old == it.value()) continue;
      changed[it.key()] = it.value();
      texts.push_back(fmt::format("{} was {} in the checkpoint and is {} in this run", it.key(),
                                  old->dump(), it.value().dump()));
    }
    if (changed.empty()) continue;
    plan.group_options.resize(live.configured_group_options.size(), nlohmann::json::object());
    plan.group_options[g] = std::move(changed);
    plan.warnings.push_back(fmt::format(
        "the optimizer's {}{}: applying this run's from step {} on", fmt::join(texts, "; "),
        several ? fmt::format(" (param group {})", g) : "", global_step));
  }
}

}  // namespace

int64_t optimizer_steps_per_epoch(int64_t batches, int64_t accumulate) {
  return batches / accumulate + (batches % accumulate != 0 ? 1 : 0);
}

int64_t optimizer_steps_after(int64_t trained, int64_t batches, int64_t accumulate) {
  return trained >= batches ? optimizer_steps_per_epoch(batches, accumulate) : trained / accumulate;
}

ResumePlan plan_resume(const Trainer& trainer, const nlohmann::json& meta, int64_t saved_epoch,
                       int64_t saved_batches, const nlohmann::json& saved_schedulers,
                       const std::string& source) {
  ResumePlan plan;
  plan.batches_in_epoch = saved_batches;
  std::optional<RunConfig> saved;
  if (meta.contains("run")) saved = run_config_from_json(meta.at("run"), source);
  // Fields of one file that contradict each other: damaged or edited, not a position to resume.
  MANTISSA_CHECK(!saved || saved_batches <= saved->num_training_batches, kWhere,
                 "{}: the checkpoint says {} batches of epoch {} were trained, but its epochs have "
                 "{} batches: the file is damaged",
                 source, saved_batches, saved_epoch + 1, saved->num_training_batches);
  if (saved) check_position(trainer, meta, *saved, saved_epoch, saved_batches, source);
  // Already at (or past) max_steps: the fit will take no step, so neither the schedule nor the
  // data order is followed, and refusing over them would hide the plain answer ("nothing to
  // train": the checkpoint is at step N).
  const int64_t max_steps = trainer.options().max_steps;
  if (max_steps >= 0 && meta.value("global_step", int64_t{0}) >= max_steps) return plan;
  if (meta.contains("accumulated_batches")) {
    const int64_t open =
        CheckpointFields(meta, source).require_int("accumulated_batches", 1, kMaxCheckpointCount);
    fail(kWhere,
         "{}: the checkpoint was written after batch {} of epoch {}, inside a "
         "gradient-accumulation window: {} batch(es) of the window had added their gradients, "
         "which a checkpoint does not hold, so a resumed run could not continue that window as "
         "the first run did. Resume from a checkpoint written at an optimizer step (an epoch's "
         "end, every_n_train_steps, or a validation after a multiple of accumulate_grad_batches "
         "batches)",
         source, saved_batches, saved_epoch + 1, open);
  }
  check_schedules(trainer, saved_schedulers, source);
  const int64_t global_step = meta.value("global_step", int64_t{0});
  plan_lr(trainer, saved, saved_schedulers, global_step, plan);
  plan_group_options(trainer, saved, global_step, plan);
  if (!saved) return plan;

  const RunConfig& live = trainer.run_config();
  const bool at_boundary = saved_batches == 0 || saved_batches >= saved->num_training_batches;
  const std::vector<std::string> diffs = data_differences(*saved, live);
  if (!diffs.empty() && !at_boundary) {
    fail(kWhere,
         "{}: the checkpoint was written after batch {} of {} of epoch {}, and this run's "
         "training data differ ({}): the rest of that epoch would not be the examples the first "
         "run had left. Resume with the checkpoint's settings, or from a checkpoint written at "
         "the end of an epoch",
         source, saved_batches, saved->num_training_batches, saved_epoch + 1,
         fmt::join(diffs, ", "));
  }
  if (!diffs.empty()) {
    plan.warnings.push_back(fmt::format(
        "this run's training data differ from the checkpoint's ({}); it was written at the end "
        "of epoch {}, so epoch {} on starts with this run's settings",
        fmt::join(diffs, ", "), saved_epoch + (saved_batches > 0 ? 1 : 0),
        saved_epoch + (saved_batches > 0 ? 2 : 1)));
  } else if (saved->num_training_batches != live.num_training_batches) {
    plan.warnings.push_back(fmt::format(
        "epochs have {} training batches in this run, {} in the checkpoint (limit_train_batches "
        "changed); {}",
        live.num_training_batches, saved->num_training_batches,
        at_boundary ? std::string("the next epoch uses the new count")
        : saved_batches < live.num_training_batches
            ? fmt::format("epoch {} continues after batch {} up to the new count", saved_epoch + 1,
                          saved_batches)
            : fmt::format("epoch {} already has {} batches and counts as finished", saved_epoch + 1,
                          saved_batches)));
  }
  // An epoch that ended in the checkpoint has ended in this run too, whatever its length now.
  if (at_boundary && saved_batches > 0) plan.batches_in_epoch = live.num_training_batches;
  if (saved->seed != live.seed) {
    plan.warnings.push_back(fmt::format(
        "the seed was {} in the checkpoint and is {} in this run: the checkpoint's random-number "
        "state is restored, so dropout and other random draws continue the first run's stream "
        "and the new seed has no effect on them",
        seed_text(saved->seed), seed_text(live.seed)));
  }
  return plan;
}

void apply_resume_plan(Trainer& trainer, const ResumePlan& plan) {
  for (size_t g = 0; g < plan.group_options.size(); ++g) {
    if (plan.group_options[g].empty()) continue;
    nlohmann::json options = trainer.optimizer()->group_options(g);
    options.update(plan.group_options[g]);
    trainer.optimizer()->set_group_options(g, options);
  }
  for (size_t g = 0; g < plan.group_lrs.size(); ++g)
    trainer.optimizer()->set_lr(g, plan.group_lrs[g]);
  // The scheduler listed last sets the optimizer's lr, as it does when they step.
  for (size_t i = 0; i < plan.scheduler_base_lrs.size(); ++i) {
    trainer.lr_schedulers()[i].scheduler->set_base_lrs(plan.scheduler_base_lrs[i]);
  }
}

void print_resume_warnings(const ResumePlan& plan) {
  for (const auto& w : plan.warnings) fmt::print(stderr, "mantissa: warning: resuming: {}\n", w);
}

}  // namespace mantissa::train
