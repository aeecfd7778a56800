#pragma once
// `mantissa train --devices N` (and `finetune`'s) on one machine (docs/distributed.md): the command
// starts itself again under mpirun with N ranks and ends with the job's exit status; inside an MPI
// job, ranks other than 0 stay silent on stdout (rank 0 prints, logs and writes for everyone), and
// an error on any rank ends the whole job with a message naming the rank.
#include <string>
#include <vector>

#include "mantissa/recipes/image_run.h"

namespace mantissa::app {

// main() records its arguments so the command can start itself again.
void remember_command_line(int argc, char** argv);
// The arguments remember_command_line recorded (empty before).
const std::vector<std::string>& recorded_command_line();

// When o.devices > 1 and this process is not part of an MPI job: runs `mpirun --oversubscribe
// -np N <this program> <the same arguments>`, hands it a Ctrl-C or SIGTERM, and exits with the
// job's status (130 after a Ctrl-C, as one process). Throws when mpirun is not installed (naming
// the package) or the command line was not recorded, naming `command` ("train", "finetune").
// Otherwise returns.
void relaunch_under_mpirun_if_needed(const recipes::TrainOptions& o, const char* command);

// Inside an MPI job of several ranks: ranks other than 0 send stdout to /dev/null and say
// neither warnings nor interrupts on stderr (rank 0 speaks for the job). Returns this
// process's rank (0 outside a job).
int quiet_non_zero_ranks();
// Whether quiet_non_zero_ranks made this process a quiet rank.
bool is_quiet_rank();

// `compare` and `bench` time runs in one process: started by mpirun with several ranks, every
// rank ran the whole command at once (each rank's timings slowed by the others'), and compare's
// runs became ddp runs that failed mid-way ("timed run ended after 13 of 25 steps"). Throws an
// error naming the command and what to run instead when this process is one of several ranks.
void refuse_multi_rank_job(const char* command);

}  // namespace mantissa::app
