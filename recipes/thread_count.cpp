#include "mantissa/recipes/thread_count.h"

#include <fmt/format.h>
#include <omp.h>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"

namespace mantissa::recipes {

void apply_thread_count(int threads) {
  MANTISSA_CHECK(threads >= 0, "train", "--threads must be at least 1, got {}", threads);
  if (threads == 0) return;
  const int cores = omp_get_num_procs();
  if (threads > cores) {
    // compare and bench train many times in one process: said once.
    warn_once(fmt::format(
        "--threads {} is more than the {} cores of this machine; expect it to be slower", threads,
        cores));
  }
  omp_set_num_threads(threads);
}

}  // namespace mantissa::recipes
