#include "mantissa/recipes/thread_count.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"

namespace mantissa::recipes {
namespace {

// The ranks of an MPI job on this machine (Open MPI's, then MPICH's variable); 1 outside one.
int ranks_on_this_machine() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* value = std::getenv(name)) {
      const int n = std::atoi(value);
      if (n >= 1) return n;
    }
  }
  return 1;
}

}  // namespace

void apply_thread_count(int threads) {
  MANTISSA_CHECK(threads >= 0, "train", "--threads must be at least 1, got {}", threads);
  if (threads == 0) return;
  const int cores = omp_get_num_procs();
  // libgomp allocates every thread's state up front and aborts the process when that fails
  // (--threads 2147483647 asked for 481 GB): a count no machine runs usefully is refused first.
  const int64_t most = int64_t{kMaxThreadsPerCore} * std::max(1, cores);
  MANTISSA_CHECK(threads <= most, "train",
                 "--threads {} is more than {} per core of this machine's {} cores; use at most "
                 "--threads {}, or leave it out (all cores)",
                 threads, kMaxThreadsPerCore, cores, most);
  if (threads > cores) {
    // compare and bench train many times in one process: said once.
    warn_once(fmt::format(
        "--threads {} is more than the {} cores of this machine; expect it to be slower", threads,
        cores));
  } else if (const int ranks = ranks_on_this_machine(); ranks > 1) {
    // Each rank of `--devices N` (or of mpirun) runs its own threads: --threads 2 at 2 ranks on
    // 2 cores was 4 threads on 2 cores without a word, as slow as one process's --threads 4.
    const long machine = ::sysconf(_SC_NPROCESSORS_ONLN);
    // Only where fewer threads would help: more ranks than cores run one thread each anyway.
    const long share = std::max(1L, machine / ranks);
    if (machine >= 1 && threads > share) {
      warn_once(fmt::format(
          "--threads {} in each of the {} ranks on this machine is {} threads on its {} cores; "
          "expect it to be slower: use --threads {}, or leave it out (--devices shares the cores "
          "out)",
          threads, ranks, threads * ranks, machine, share));
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace mantissa::recipes
