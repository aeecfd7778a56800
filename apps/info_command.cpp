#include "info_command.h"

#include <fmt/format.h>
#include <omp.h>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/version.h"

namespace mantissa::app {

void add_info_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("info", "Show version, CPU features and kernel paths");
  cmd->callback([] {
    fmt::print("mantissa {}\n\n", version());
    fmt::print("CPU: {}\n", describe_cpu());
    fmt::print("CPU features:\n{}\n", describe_cpu_features());
    fmt::print("threads: {} (OpenMP)\n", omp_get_max_threads());
    fmt::print("oneDNN ISA: {}\n\n", onednn_isa_name());
    fmt::print("Kernel paths:\n");
    for (const auto& p : kernel_paths()) {
      fmt::print("  {}:\n    matmul:      {}\n    conversion:  {}\n    elementwise: {}\n",
                 p.dtype.name(), p.matmul, p.conversion, p.elementwise);
    }
  });
}

}  // namespace mantissa::app
