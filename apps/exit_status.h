#pragma once
// The exit statuses of `mantissa` (docs/cli.md, "Exit status"), for scripts that run it.
namespace mantissa::app {

// 0: success (also --help, --version, and a run with nothing to train).
// A mistake in the command line, a --config file, the data or a checkpoint, or an output that
// cannot be written: nothing useful was produced.
inline constexpr int kErrorExitStatus = 2;
// A bug of mantissa's (an exception it did not expect).
inline constexpr int kInternalErrorExitStatus = 3;
// Training diverged: the loss or weights stopped being finite during training, or the final
// weights' evaluation is NaN or inf. What the run writes (metrics JSON, checkpoints) is written,
// but it is no result. `compare` ends so when every precision diverged.
inline constexpr int kDivergedExitStatus = 4;
// Under mpirun: a rank waited in a collective longer than --collective-timeout (another rank
// hung); the waiting rank named the ranks that did not arrive and ended the job.
inline constexpr int kCollectiveTimeoutExitStatus = 5;
// 128 + the signal: stopped by SIGINT (130) or SIGTERM (143), after saving last.safetensors.

}  // namespace mantissa::app
