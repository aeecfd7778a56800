#include "mantissa/recipes/trainer_flag_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

// `value` of `flag` must be one of the two words a and b.
void check_either(const std::string& value, const char* flag, const char* a, const char* b,
                  const char* where) {
  MANTISSA_CHECK(value == a || value == b, where, "{} must be {} or {}, got {}", flag, a, b,
                 quote_untrusted(value, 64));
}

// `value` of `flag` must be one of `names`; a near miss gets the likely name.
void check_one_of(const std::string& value, const char* flag, const std::vector<std::string>& names,
                  const char* where) {
  if (std::find(names.begin(), names.end(), value) != names.end()) return;
  const std::string meant = likely_meant(value, names);
  fail(where, "unknown {} {}{}; valid values are: {}", flag, quote_untrusted(value, 64),
       meant.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", meant),
       fmt::join(names, ", "));
}

}  // namespace

void check_eval_interval(const std::optional<int64_t>& eval_interval, const TrainOptions& o,
                         const char* where) {
  if (!eval_interval) return;
  MANTISSA_CHECK(*eval_interval >= 1, where,
                 "--eval-interval must be at least 1 (optimizer steps between validations), got "
                 "{}; --limit-val-batches 0 turns validation off",
                 *eval_interval);
  MANTISSA_CHECK(o.val_check_interval == TrainOptions{}.val_check_interval, where,
                 "--eval-interval and --val-check-interval both set when to validate; give one "
                 "of them");
}

void check_trainer_flags(const TrainOptions& o, const char* where) {
  MANTISSA_CHECK(o.early_stopping_patience >= 0, where,
                 "--early-stopping-patience must be 0 or more (validation checks without "
                 "improvement before the run stops), got {}",
                 o.early_stopping_patience);
  MANTISSA_CHECK(std::isfinite(o.early_stopping_min_delta), where,
                 "--early-stopping-min-delta must be a finite number (the smallest change that "
                 "counts as an improvement, such as 0.001), got {}",
                 o.early_stopping_min_delta);
  check_either(o.early_stopping_mode, "--early-stopping-mode", "min", "max", where);
  check_either(o.checkpoint_mode, "--checkpoint-mode", "min", "max", where);
  MANTISSA_CHECK(o.save_top_k >= -1, where,
                 "--save-top-k must be -1 (keep every checkpoint), 0 (only last.safetensors) or "
                 "a positive count, got {}",
                 o.save_top_k);
  MANTISSA_CHECK(o.every_n_train_steps >= 0, where,
                 "--every-n-train-steps must be 0 (a checkpoint per epoch) or a positive number "
                 "of optimizer steps, got {}",
                 o.every_n_train_steps);
  MANTISSA_CHECK(o.fast_dev_run >= 0, where,
                 "--fast-dev-run must be 0 (off) or a positive number of batches, got {}",
                 o.fast_dev_run);
  MANTISSA_CHECK(o.check_val_every_n_epoch >= 1, where,
                 "--check-val-every-n-epoch must be at least 1, got {}", o.check_val_every_n_epoch);
  MANTISSA_CHECK(o.num_sanity_val_steps >= -1, where,
                 "--num-sanity-val-steps must be -1 (every validation batch), 0 (none) or a "
                 "positive number of batches, got {}",
                 o.num_sanity_val_steps);
  // Named by the library as "[Trainer] unknown profiler", "[set_float32_matmul_precision] ...",
  // or (the optimizer) only once the data had loaded.
  check_one_of(o.profiler.empty() ? "none" : o.profiler, "--profiler", {"simple", "none"}, where);
  // ZeRO stage 3 (DeepSpeed's name) is what fsdp does: parameters, gradients and state sharded.
  MANTISSA_CHECK(o.strategy != "zero3" && o.strategy != "zero-3", where,
                 "--strategy {}: ZeRO stage 3 (parameters, gradients and optimizer state sharded) "
                 "is --strategy fsdp here",
                 o.strategy);
  check_one_of(o.strategy, "--strategy", {"auto", "ddp", "zero1", "zero2", "fsdp", "single_device"},
               where);
  // The distributed flags, in the command's words before any rank starts (the library says
  // them again in its own).
  check_either(o.grad_reduce_dtype, "--grad-reduce-dtype", "float32", "bfloat16", where);
  MANTISSA_CHECK(o.fsdp_param_dtype == "float32" || o.strategy == "fsdp", where,
                 "--fsdp-param-dtype {} applies to --strategy fsdp (this run's strategy is {})",
                 quote_untrusted(o.fsdp_param_dtype, 64), quote_untrusted(o.strategy, 64));
  MANTISSA_CHECK(!o.sharded_checkpoint || o.strategy == "zero1" || o.strategy == "zero2" ||
                     o.strategy == "fsdp",
                 where,
                 "--sharded-checkpoint writes each rank's part of the optimizer state, which "
                 "only --strategy zero1, zero2 and fsdp shard (this run's strategy is {})",
                 quote_untrusted(o.strategy, 64));
  MANTISSA_CHECK(o.ddp_bucket_cap_mb > 0, where, "--ddp-bucket-cap-mb must be positive, got {}",
                 o.ddp_bucket_cap_mb);
  MANTISSA_CHECK(std::isfinite(o.collective_timeout) && o.collective_timeout >= 0, where,
                 "--collective-timeout must be a number of seconds >= 0 (0: wait forever), got {}",
                 o.collective_timeout);
  MANTISSA_CHECK(o.accelerator != "mps" && o.accelerator != "tpu", where,
                 "--accelerator {} is not available: mantissa has no {} backend; use --accelerator "
                 "cpu, gpu (CUDA) or auto",
                 o.accelerator, o.accelerator);
  check_one_of(o.accelerator, "--accelerator", {"cpu", "gpu", "cuda", "auto"}, where);
  check_one_of(o.float32_matmul_precision, "--float32-matmul-precision",
               {"highest", "high", "medium"}, where);
  optim::check_optimizer_name(o.optimizer, where);
  check_either(o.gradient_clip_algorithm, "--gradient-clip-algorithm", "norm", "value", where);
  check_either(o.amp_backend, "--amp-backend", "native", "apex", where);
  if (o.amp_backend == "apex") {
    MANTISSA_CHECK(train::precision_traits(o.precision).apex_levels, where,
                   "--amp-backend apex runs with --precision 16-mixed only, got --precision {}; "
                   "leave --amp-backend out (native, the default) for other precisions",
                   quote_untrusted(o.precision, 64));
  }
  if (!o.amp_level.empty()) {
    MANTISSA_CHECK(o.amp_backend == "apex", where,
                   "--amp-level {} applies to --amp-backend apex (with --precision 16-mixed) "
                   "only; leave it out, or add --amp-backend apex",
                   quote_untrusted(o.amp_level, 64));
    MANTISSA_CHECK(
        o.amp_level == "O0" || o.amp_level == "O1" || o.amp_level == "O2" || o.amp_level == "O3",
        where, "--amp-level must be O0, O1, O2 or O3 (letter O, then a digit), got {}",
        quote_untrusted(o.amp_level, 64));
  }
}

}  // namespace mantissa::recipes
