// make_strategy: the single-device strategy, or DDPStrategy over the process's communicator.
#include "mantissa/train/strategy.h"

#include <algorithm>
#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/train/ddp_strategy.h"

namespace mantissa::train {

std::vector<std::string> Strategy::union_over_ranks(const std::vector<std::string>& names) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return sorted;
}

std::shared_ptr<Strategy> make_strategy(const StrategyOptions& options) {
  const std::string& name = options.strategy;
  MANTISSA_CHECK(name == "auto" || name == "ddp" || name == "zero1" || name == "zero2" ||
                     name == "fsdp" || name == "single_device",
                 "Trainer",
                 "unknown strategy '{}'; valid values are: auto, ddp, zero1, zero2, fsdp, "
                 "single_device",
                 name);
  MANTISSA_CHECK(std::isfinite(options.collective_timeout_s) && options.collective_timeout_s >= 0,
                 "Trainer",
                 "collective_timeout_s must be a number of seconds >= 0 (0: no timeout), got {}",
                 options.collective_timeout_s);
  MANTISSA_CHECK(
      !options.sharded_checkpoints || name == "zero1" || name == "zero2" || name == "fsdp",
      "Trainer",
      "sharded_checkpoints (--sharded-checkpoint) writes each rank's part of the "
      "optimizer state, which only strategies 'zero1', 'zero2' and 'fsdp' shard; "
      "strategy is '{}'",
      name);
  MANTISSA_CHECK(options.ddp.reduce_dtype == kFloat32 || options.ddp.reduce_dtype == kBFloat16,
                 "Trainer", "ddp.reduce_dtype (--grad-reduce-dtype) is float32 or bfloat16, got {}",
                 options.ddp.reduce_dtype.name());
  MANTISSA_CHECK(options.devices == -1 || options.devices >= 1, "Trainer",
                 "devices must be -1 (as launched) or at least 1, got {}", options.devices);
  MANTISSA_CHECK(name != "single_device" || options.devices <= 1, "Trainer",
                 "strategy 'single_device' trains on one device, but devices={} asks for {}: "
                 "use strategy 'ddp' or 'auto', or devices=1",
                 options.devices, options.devices);
  const int launched = dist::launched_by_mpi() ? dist::launcher_world_size() : 1;
  const bool want_ddp = name == "ddp" || name == "zero1" || name == "zero2" || name == "fsdp" ||
                        (name == "auto" && (launched > 1 || options.devices > 1));
  if (!want_ddp) {
    // An explicit single_device inside an MPI job: every rank trains alone (tests compare a
    // ddp run against that on purpose).
    // As in Lightning, where the layer sync has no effect on one device: the same script runs
    // on one process and on several, so this is a warning, not an error.
    if (options.sync_batchnorm)
      warn_once(
          "[Trainer] sync_batchnorm has no effect on one process: batch norm uses this "
          "process's batch statistics, which are the whole batch's (it synchronises the ranks "
          "of a ddp run)");
    return std::make_shared<Strategy>();
  }
  MANTISSA_CHECK(dist::mpi_compiled(), "Trainer", "{}",
                 dist::mpi_missing_message(
                     fmt::format("strategy '{}' (devices > 1)", name == "auto" ? "ddp" : name)));
  if (options.devices > 1 && launched != options.devices) {
    fail("Trainer",
         "devices={} but this process is {}; start the job with `mpirun -np {} ...` (or `mantissa "
         "train --devices {}`, which starts mpirun itself)",
         options.devices,
         launched == 1 ? std::string("not part of an MPI job")
                       : fmt::format("one of {} MPI ranks", launched),
         options.devices, options.devices);
  }
  MANTISSA_CHECK(options.devices == -1 || options.devices == launched, "Trainer",
                 "devices={} but the job has {} ranks", options.devices, launched);
  return std::make_shared<DDPStrategy>(dist::world(), options);
}

}  // namespace mantissa::train
