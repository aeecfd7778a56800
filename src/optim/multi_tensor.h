#pragma once
// One parallel pass over the elements of many parameters (torch's "foreach"/multi-tensor
// optimizer step): instead of a fork and join per parameter, the parameters' element ranges
// are laid end to end and split into slices that the threads take as they come free.
#include <cstdint>
#include <functional>
#include <vector>

namespace mantissa::optim::detail {

// Updates elements [begin, end) of one parameter (and its state).
struct UpdateJob {
  std::function<void(int64_t begin, int64_t end)> run;
  int64_t numel = 0;
};

// Runs every job over all its elements. The slices depend only on the sizes and the thread
// count (which thread takes which does not matter): element-wise updates give the same bits
// under any split. Below the parallel grain
// in total it runs on the calling thread.
void run_update_jobs(const std::vector<UpdateJob>& jobs);

}  // namespace mantissa::optim::detail
