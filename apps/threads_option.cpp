#include "threads_option.h"

#include <fmt/format.h>
#include <omp.h>

#include "mantissa/core/error.h"

namespace mantissa::app {

void check_threads_option(const CLI::Option* option, int threads, const char* command) {
  if (option == nullptr || option->count() == 0) return;
  MANTISSA_CHECK(threads >= 1, command,
                 "--threads must be at least 1, got {}; leave it out to use all {} cores", threads,
                 omp_get_num_procs());
}

}  // namespace mantissa::app
