#include "info_command.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "mantissa/core/allocator.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/openmp_wait.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precision_support.h"
#include "mantissa/version.h"
#include "version_text.h"

namespace mantissa::app {

namespace {

// The precision registry: what each `--precision` value means, its aliases, and the names that
// are recognised but not implemented yet.
void print_precisions() {
  fmt::print("\nPrecisions (--precision):\n");
  size_t width = 0;  // names are padded to the longest ("transformer-engine-float16") + 2
  for (const auto& e : train::precision_registry()) width = std::max(width, e.name.size() + 2);
  bool any_unimplemented = false;
  for (const auto& e : train::precision_registry()) {
    if (!e.implemented) {
      any_unimplemented = true;
      continue;
    }
    std::string aliases;
    for (const auto& a : e.aliases) aliases += (aliases.empty() ? " (alias " : ", ") + a.name;
    if (!aliases.empty()) aliases += ")";
    fmt::print("  {:<{}}{}{}\n", e.name, width, e.description, aliases);
  }
  if (!any_unimplemented) return;
  fmt::print("Recognised, not implemented yet:\n");
  for (const auto& e : train::precision_registry()) {
    if (!e.implemented) fmt::print("  {:<{}}{}\n", e.name, width, e.description);
  }
}

// The CUDA GPUs this build can use, or why there are none.
void print_gpus() {
  if (!cuda::is_available()) {
    fmt::print("GPUs: none usable ({})\n\n", cuda::unavailable_reason());
    return;
  }
  fmt::print("GPUs (CUDA backend, --accelerator gpu):\n");
  for (int i = 0; i < cuda::device_count(); ++i) {
    const cuda::DeviceProperties p = cuda::get_device_properties(i);
    fmt::print(
        "  cuda:{}  {}, compute capability {}.{}, {} multiprocessors, {}; bf16: {}, "
        "FP8: {}\n",
        i, p.name, p.major, p.minor, p.multi_processor_count, format_bytes(p.total_memory),
        cuda::is_bf16_supported(i) ? "yes" : "no (needs 8.0)",
        cuda::is_fp8_supported(i) ? "yes" : "no (needs 8.9)");
  }
  fmt::print("\n");
}

}  // namespace

void add_info_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("info", "Show version, CPU features, kernel paths and precisions");
  cmd->callback([] {
    fmt::print("{}\n\n", version_text());  // with the git commit, as --version
    fmt::print("CPU: {}\n", describe_cpu());
    const CpuIdentity& id = cpu_identity();
    if (id.l1d_ways > 0)
      fmt::print("L1 data cache: {} KiB, {}-way per core\n", id.l1d_kib, id.l1d_ways);
    fmt::print("CPU features:\n{}\n", describe_cpu_features());
    fmt::print("threads: {} (OpenMP)\n", omp_get_max_threads());
    fmt::print("OpenMP wait: {}\n", describe_openmp_wait());
    fmt::print("oneDNN ISA: {}\n", onednn_isa_name());
    print_gpus();
    fmt::print("Kernel paths:\n");
    for (const auto& p : kernel_paths()) {
      fmt::print("  {}:\n    matmul:      {}\n    conversion:  {}\n    elementwise: {}\n",
                 p.dtype.name(), p.matmul, p.conversion, p.elementwise);
    }
    fmt::print("  quantized weights:\n");
    for (const auto& q : quantized_weight_paths()) fmt::print("    {}: {}\n", q.weights, q.product);
    fmt::print("  8-bit optimizer state (adamw8bit, adam8bit):\n    {}\n", optimizer_8bit_path());
    print_precisions();
    fmt::print("\nPrecision with accelerators (this build, this machine):\n{}",
               train::precision_support_table(train::this_machine()));
  });
}

}  // namespace mantissa::app
