#pragma once
// Which implementation each dtype's hot kernels use on this CPU, for `mantissa info` and the
// one-time warning when bf16 runs on an emulated (slow) path.
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"

namespace mantissa {

struct KernelPath {
  DType dtype;
  std::string matmul;       // e.g. "oneDNN avx512_core_bf16 (fp32 accumulation)"
  std::string conversion;   // e.g. "AVX-512 BF16 (vcvtne2ps2bf16)"
  std::string elementwise;  // e.g. "fp32 registers, OpenMP"
};

std::vector<KernelPath> kernel_paths();

// The quantized-weight layers' products on this CPU: {"nf4/fp4 (4-bit)", "..."} and
// {"int8 (LLM.int8)", "..."}.
struct QuantizedPath {
  std::string weights;
  std::string product;
};
std::vector<QuantizedPath> quantized_weight_paths();
// How the 8-bit optimizers (adamw8bit, adam8bit) decode and encode their state on this CPU.
std::string optimizer_8bit_path();
std::string onednn_isa_name();  // the ISA oneDNN dispatches to on this machine
// True when bf16 matmul has native dot-product hardware (AVX-512 BF16 or AMX) that pays off
// here (an Intel core's AVX-512 BF16 without AMX is set aside, core/cpu_features.h).
bool has_native_bf16();
// Why bf16 products are widened to fp32 on this CPU, as the start of a sentence ("this CPU has
// no AVX-512 BF16 or AMX", or why its AVX-512 BF16 is not used); "" when they are native.
std::string why_bf16_products_are_widened();
// The warning text when bf16 compute is emulated through fp32 (no faster than fp32) on this CPU,
// else "".
std::string bf16_emulation_warning();
// Prints a one-time warning to stderr when bf16 compute is emulated on this CPU.
void warn_once_if_bf16_emulated();

}  // namespace mantissa
