#pragma once
// Which precision runs where: the precision x accelerator table of `mantissa info` (Lightning's
// "Precision with Accelerators"), as this build and this machine support it, with the reason
// for every cell that is not a plain "yes". Read from the precision registry (each entry's
// `math`), so a new precision gets its row without editing this file. make_precision uses it
// to refuse ("no") or warn once ("emulated") about the combination it is asked for.
#include <string>
#include <vector>

#include "mantissa/train/precision_registry.h"

namespace mantissa::train {

// The table's columns.
enum class AcceleratorKind {
  kCpu,            // any x86-64 CPU without AVX-512 BF16 (AVX2 or older)
  kCpuAvx512Bf16,  // a CPU with AVX-512 BF16 or AMX (native bf16 dot products)
  kCuda,           // an NVIDIA GPU through a CUDA backend
};
inline constexpr AcceleratorKind kAllAcceleratorKinds[] = {
    AcceleratorKind::kCpu, AcceleratorKind::kCpuAvx512Bf16, AcceleratorKind::kCuda};
// "CPU", "CPU with AVX-512 BF16", "CUDA GPU".
const char* accelerator_kind_name(AcceleratorKind kind);

enum class Support { kYes, kEmulated, kNo };
const char* support_name(Support support);  // "yes", "emulated", "no"

struct SupportCell {
  Support support = Support::kYes;
  std::string reason;  // empty for a plain "yes"
};

// What the table depends on besides the registry. this_machine() fills it from the CPU
// features (MANTISSA_DISABLE_SIMD applies), the build and /proc; tests build their own.
struct MachineCaps {
  bool native_bf16 = false;  // AVX-512 BF16 or AMX
  bool cuda_build = false;   // compiled with the CUDA backend (cuda::is_built)
  bool gpu_present = false;  // a CUDA GPU can be used (cuda::is_available)
  bool gpu_bf16 = false;     // ... and it has bf16 arithmetic (compute capability >= 8.0)
  bool gpu_fp8 = false;      // ... and FP8 matrix products (compute capability >= 8.9)
};
MachineCaps this_machine();
// The CPU column this machine belongs to.
AcceleratorKind this_cpu_kind(const MachineCaps& caps);

// One cell of the table.
SupportCell precision_support(const PrecisionEntry& entry, AcceleratorKind kind,
                              const MachineCaps& caps);
// The whole table, one row per implemented precision, for `mantissa info`; the column of this
// machine's CPU is marked, and the reasons are listed under the table as numbered notes.
std::string precision_support_table(const MachineCaps& caps);

// "precision 'NAME' is emulated on this CPU: <reason>" where `entry` is emulated on
// `accelerator` ("cpu", "gpu", "cuda"), "" where it runs natively or not at all.
std::string emulation_warning(const PrecisionEntry& entry, const std::string& accelerator,
                              const MachineCaps& caps);

// What make_precision does with a precision on an accelerator: "no" throws with the reason;
// "emulated" prints a one-time warning per precision with the reason (emulation_warning; bf16
// shares the kernels' emulated-bf16 warning, printed once per process). The FP8 precisions
// leave it to their plugin, which says it once a layer runs in FP8.
void check_precision_support(const PrecisionEntry& entry, const std::string& accelerator,
                             const MachineCaps& caps);

}  // namespace mantissa::train
