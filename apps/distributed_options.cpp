#include "distributed_options.h"

#include <fmt/format.h>

#include <string>

#include "command_line_errors.h"
#include "config_source.h"
#include "distributed_launch.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/dist/communicator.h"

namespace mantissa::app {

void add_distributed_options(CLI::App& cmd, recipes::TrainOptions& o) {
  cmd.add_option("--devices", o.devices,
                 "Data-parallel ranks on this machine: N > 1 starts the run under mpirun "
                 "(docs/distributed.md); under mpirun, the job's rank count; auto (as "
                 "Lightning's devices=\"auto\"): as launched, one process outside mpirun")
      // Lightning's "auto" is the default, -1 here.
      ->transform(CLI::Validator(
          [](std::string& value) {
            if (value == "auto") {
              value = "-1";
              return std::string();
            }
            // A word that is no count: name auto beside the counts, which the generic "not an
            // integer" does not.
            if (!is_whole_number(value))
              return fmt::format(
                  "'{}' is neither a number of devices nor auto (expected a "
                  "whole number such as 2, or auto)",
                  escape_untrusted(value));
            // -1 is the library's "as launched" (TrainerOptions::devices) and what auto maps to
            // here, but typed as a count it would be taken as auto, and 0 would get a later,
            // vaguer error.
            // Lightning refuses both ("should be an int > 0"): a count is positive.
            if (value.starts_with('-') || value.find_first_not_of("+0") == std::string::npos)
              return fmt::format(
                  "{} is not a number of devices: give a positive count such as 2, or auto (as "
                  "many ranks as mpirun started; one process outside mpirun)",
                  escape_untrusted(value));
            return std::string();
          },
          ""))
      ->type_name("N|auto");  // not INT: auto, the default, is no integer
  cmd.add_option("--strategy", o.strategy,
                 "auto (ddp when started with several ranks), ddp, zero1 (ddp with the optimizer "
                 "state sharded over the ranks), zero2 (zero1 with the gradients sharded too), "
                 "fsdp (zero2 with the parameters sharded too, each layer gathered around its "
                 "use) or single_device")
      ->capture_default_str();
  cmd.add_option("--grad-reduce-dtype", o.grad_reduce_dtype,
                 "ddp, zero1, zero2, fsdp: the dtype gradients are reduced in over the ranks, "
                 "float32 or bfloat16 (half the bytes, docs/distributed.md states the bound)")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  cmd.add_flag("--ddp-bf16-compress", o.ddp_bf16_compress,
               "the same as --grad-reduce-dtype bfloat16");
  cmd.add_option("--ddp-bucket-cap-mb", o.ddp_bucket_cap_mb,
                 "ddp: float32 megabytes per gradient all-reduce bucket")
      ->capture_default_str();
  cmd.add_option("--fsdp-param-dtype", o.fsdp_param_dtype,
                 "fsdp: the dtype the layers' float32 parameters are all-gathered in, float32, "
                 "or the mixed precision's compute dtype: bfloat16 (bf16-mixed) or float16 "
                 "(16-mixed), half the bytes (docs/distributed.md states what changes)")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}))
      ->capture_default_str();
  cmd.add_flag("--no-fsdp-prefetch", o.no_fsdp_prefetch,
               "fsdp: gather each layer where it starts instead of starting the next layer's "
               "gather (non-blocking) before the current layer runs; the same results");
  cmd.add_option("--collective-timeout", o.collective_timeout,
                 "ddp, zero1, zero2, fsdp: seconds a rank waits in one collective for the others "
                 "before it names the ranks that did not arrive and ends the job (exit status "
                 "5); 0 waits forever")
      ->capture_default_str();
  cmd.add_flag("--sharded-checkpoint", o.sharded_checkpoint,
               "zero1, zero2, fsdp: each rank writes its part of the optimizer state into a "
               "directory beside the checkpoint file (mantissa checkpoint consolidate makes "
               "one file of it)");
}

void start_distributed_run(const CLI::App& cmd, const recipes::TrainOptions& o,
                           const char* command) {
  MANTISSA_CHECK(!o.ddp_bf16_compress || cmd.get_option("--grad-reduce-dtype")->count() == 0 ||
                     o.grad_reduce_dtype == "bfloat16",
                 command,
                 "--ddp-bf16-compress is --grad-reduce-dtype bfloat16, but --grad-reduce-dtype "
                 "{} was given too: give one of them",
                 o.grad_reduce_dtype);
  MANTISSA_CHECK(o.devices == -1 || o.devices >= 1, command, "--devices must be at least 1, got {}",
                 o.devices);
  // The ranks restart this command line: they would read --config again, and a stream gives its
  // text once.
  MANTISSA_CHECK(o.devices <= 1 || dist::launched_by_mpi() || !config_read_from_stream(), command,
                 "--devices {} restarts this command under mpirun, whose ranks would read "
                 "--config again from a stream (stdin, a pipe or a FIFO) that gives its text "
                 "once: write the flags to a file and pass its path",
                 o.devices);
  relaunch_under_mpirun_if_needed(o, command);  // --devices N > 1: does not return
  quiet_non_zero_ranks();
  if (o.sharded_checkpoint && o.checkpoint_dir.empty())
    warn(
        "--sharded-checkpoint has no effect without --checkpoint-dir (no checkpoints are "
        "written)");
}

}  // namespace mantissa::app
