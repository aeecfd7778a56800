#include "optim/multi_tensor.h"

#include <omp.h>

#include <algorithm>

#include "core/dtype_dispatch.h"

namespace mantissa::optim::detail {
namespace {

// Calls each job on its part of the concatenated range [begin, end).
void run_slice(const std::vector<UpdateJob>& jobs, int64_t begin, int64_t end) {
  int64_t offset = 0;
  for (const UpdateJob& job : jobs) {
    const int64_t lo = std::max(begin, offset);
    const int64_t hi = std::min(end, offset + job.numel);
    if (lo < hi) job.run(lo - offset, hi - offset);
    offset += job.numel;
    if (offset >= end) break;
  }
}

}  // namespace

void run_update_jobs(const std::vector<UpdateJob>& jobs) {
  int64_t total = 0;
  for (const UpdateJob& job : jobs) total += job.numel;
  if (total <= kernels::kParallelGrain) {
    run_slice(jobs, 0, total);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t per = (total + threads - 1) / threads;
    const int64_t begin = std::min(total, t * per);
    const int64_t end = std::min(total, begin + per);
    if (begin < end) run_slice(jobs, begin, end);
  }
}

}  // namespace mantissa::optim::detail
