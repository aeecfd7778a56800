#include "thread_count.h"

#include <fmt/format.h>
#include <omp.h>

#include <mutex>
#include <set>

#include "mantissa/core/error.h"

namespace mantissa::recipes {

void apply_thread_count(int threads) {
  MANTISSA_CHECK(threads >= 0, "train", "--threads must be at least 1, got {}", threads);
  if (threads == 0) return;
  const int cores = omp_get_num_procs();
  if (threads > cores) {
    // compare and bench train many times in one process: say it once.
    static std::mutex mutex;
    static std::set<int> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(threads).second) {
      fmt::print(stderr,
                 "mantissa: warning: --threads {} is more than the {} cores of this machine; "
                 "expect it to be slower\n",
                 threads, cores);
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace mantissa::recipes
