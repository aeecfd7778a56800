// The precision x accelerator table (precision_support.h).
#include "mantissa/train/precision_support.h"

#include <fmt/format.h>

#include <algorithm>

#include <map>
#include "mantissa/core/cpu_features.h"

#include "mantissa/core/cuda.h"

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa::train {
namespace {

SupportCell cuda_cell(const PrecisionEntry& entry, const MachineCaps& caps) {
  if (!caps.cuda_build) {
    return {Support::kNo,
            caps.gpu_present
                ? "this build has no CUDA backend (configured without CUDA), although this "
                  "machine has an NVIDIA GPU"
                : "this build has no CUDA backend (configured without CUDA), and this machine "
                  "has no NVIDIA GPU"};
  }
  if (std::find(entry.accelerators.begin(), entry.accelerators.end(), "gpu") ==
      entry.accelerators.end()) {
    return {Support::kNo,
            "not on the CUDA backend yet: the LLM.int8 layers have CPU kernels only "
            "(docs/cuda.md)"};
  }
  if (!caps.gpu_present) return {Support::kNo, "no usable NVIDIA GPU on this machine"};
  if (entry.math == PrecisionMath::kBFloat16 && !caps.gpu_bf16)
    return {Support::kNo, "bf16 needs a GPU of compute capability 8.0 (Ampere) or newer"};
  if (entry.math == PrecisionMath::kFloat8 && !caps.gpu_fp8)
    return {Support::kNo,
            "FP8 matrix products need a GPU of compute capability 8.9 (Ada, Hopper) or newer"};
  return {Support::kYes, ""};
}

SupportCell cpu_cell(PrecisionMath math, bool native_bf16) {
  switch (math) {
    case PrecisionMath::kFloat32:
    case PrecisionMath::kFloat64:
      return {Support::kYes, ""};
    case PrecisionMath::kBFloat16:
      if (native_bf16) return {Support::kYes, ""};
      if (avx512_bf16_set_aside())
        return {Support::kEmulated,
                fmt::format("{}, so bf16 operands are widened to fp32 while the GEMM packs them, "
                            "as on CPUs with no AVX-512 BF16: no faster than 32-true (0.83-1.1 of "
                            "its speed, against 0.57-0.88 on the dot products), the memory "
                            "savings remain",
                            kAvx512Bf16SetAsideReason)};
      if (simd_level() == SimdLevel::kAvx512)
        return {Support::kEmulated,
                "AVX-512 without its BF16 dot products: bf16 operands are widened to fp32 while "
                "the GEMM packs them, so it is no faster than 32-true (the MLP, ViT and GPT "
                "steps at about 0.85-0.95 of its speed); the memory savings remain"};
      return {Support::kEmulated,
              "no AVX-512 BF16 or AMX: bf16 operands are widened to fp32 for every product "
              "(inside the GEMM's packing), so it is no faster than 32-true; the memory savings "
              "remain"};
    case PrecisionMath::kFloat16:
      return {Support::kEmulated,
              "mantissa's CPU kernels have no fp16 arithmetic (not even where the CPU has "
              "AVX-512 FP16): fp16 operands are widened to fp32 for every product, so it is no "
              "faster than 32-true; the memory savings remain "
              "(Lightning has no fp16 AMP on CPUs at all)"};
    case PrecisionMath::kFloat8:
      if (native_bf16)
        return {Support::kEmulated,
                "no CPU has FP8 or FP4 arithmetic: under the delayed and current recipes the casts "
                "also write the codes widened to bf16 for the bf16 dot products, under the others "
                "the codes are widened inside the GEMM's packing and multiplied with bf16 dot "
                "products that give fp32 products' bits (FP8/FP4 numerics; the speed of those "
                "products plus the casts: docs/fp8.md)"};
      return {Support::kEmulated,
              "no CPU has FP8 or FP4 arithmetic: the codes are widened to fp32 inside the "
              "GEMM's packing and multiplied there (FP8/FP4 numerics, fp32 speed plus the "
              "casts: docs/fp8.md)"};
    case PrecisionMath::kInt8:
      return {Support::kYes, ""};  // int8 dot products with int32 accumulation
    case PrecisionMath::kInt4: {
      // The weights are dequantised per product, as bitsandbytes does, into the compute dtype:
      // bf16 by default (Lightning's), so without native bf16 products the 4-bit modes compute
      // as bf16-mixed does there. They were marked "yes" beside bf16-mixed's "emulated".
      if (native_bf16) return {Support::kYes, ""};
      return {Support::kEmulated,
              "the 4-bit weights are decoded for products in the compute dtype, bf16 by default "
              "(--quant-dtype), and bf16 is emulated on this CPU: " +
                  cpu_cell(PrecisionMath::kBFloat16, false).reason +
                  " (--quant-dtype fp32 computes in fp32 outright)"};
    }
  }
  return {Support::kYes, ""};
}

}  // namespace

const char* accelerator_kind_name(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::kCpu:
      return "CPU";
    case AcceleratorKind::kCpuAvx512Bf16:
      return "CPU with AVX-512 BF16";
    case AcceleratorKind::kCuda:
      return "CUDA GPU";
  }
  return "?";
}

const char* support_name(Support support) {
  switch (support) {
    case Support::kYes:
      return "yes";
    case Support::kEmulated:
      return "emulated";
    case Support::kNo:
      return "no";
  }
  return "?";
}

MachineCaps this_machine() {
  return {.native_bf16 = has_native_bf16(),
          .cuda_build = cuda::is_built(),
          .gpu_present = cuda::is_available(),
          .gpu_bf16 = cuda::is_bf16_supported(),
          .gpu_fp8 = cuda::is_fp8_supported()};
}

AcceleratorKind this_cpu_kind(const MachineCaps& caps) {
  return caps.native_bf16 ? AcceleratorKind::kCpuAvx512Bf16 : AcceleratorKind::kCpu;
}

SupportCell precision_support(const PrecisionEntry& entry, AcceleratorKind kind,
                              const MachineCaps& caps) {
  if (kind == AcceleratorKind::kCuda) return cuda_cell(entry, caps);
  return cpu_cell(entry.math, kind == AcceleratorKind::kCpuAvx512Bf16);
}

std::string precision_support_table(const MachineCaps& caps) {
  const AcceleratorKind mine = this_cpu_kind(caps);
  std::vector<std::string> headers;
  for (AcceleratorKind k : kAllAcceleratorKinds) {
    headers.push_back(fmt::format("{}{}", accelerator_kind_name(k), k == mine ? " *" : ""));
  }
  // Reasons repeat down a column; each distinct one gets a number.
  std::vector<std::string> notes;
  auto note_of = [&](const std::string& reason) {
    auto it = std::find(notes.begin(), notes.end(), reason);
    if (it == notes.end()) {
      notes.push_back(reason);
      return notes.size();
    }
    return static_cast<size_t>(it - notes.begin()) + 1;
  };
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : precision_registry()) {
    if (!e.implemented) continue;
    std::vector<std::string> row{e.name};
    for (AcceleratorKind k : kAllAcceleratorKinds) {
      const SupportCell c = precision_support(e, k, caps);
      row.push_back(c.reason.empty()
                        ? support_name(c.support)
                        : fmt::format("{} ({})", support_name(c.support), note_of(c.reason)));
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width{9};  // "precision"
  for (const auto& h : headers) width.push_back(h.size());
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = " ";
    for (size_t i = 0; i < cells.size(); ++i) l += fmt::format(" {:<{}}", cells[i], width[i]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  std::vector<std::string> head{"precision"};
  head.insert(head.end(), headers.begin(), headers.end());
  line(head);
  for (const auto& r : rows) line(r);
  out += fmt::format("  * this machine's CPU{}\n",
                     caps.gpu_present ? "; an NVIDIA GPU is present" : "; no NVIDIA GPU");
  for (size_t i = 0; i < notes.size(); ++i) out += fmt::format("  ({}) {}\n", i + 1, notes[i]);
  return out;
}

namespace {

AcceleratorKind kind_of(const std::string& accelerator, const MachineCaps& caps) {
  const bool gpu = accelerator == "gpu" || accelerator == "cuda";
  return gpu ? AcceleratorKind::kCuda : this_cpu_kind(caps);
}

}  // namespace

std::string emulation_warning(const PrecisionEntry& entry, const std::string& accelerator,
                              const MachineCaps& caps) {
  const AcceleratorKind kind = kind_of(accelerator, caps);
  const SupportCell cell = precision_support(entry, kind, caps);
  if (cell.support != Support::kEmulated) return "";
  return fmt::format("precision '{}' is emulated on this {}: {}", entry.name,
                     accelerator_kind_name(kind), cell.reason);
}

void check_precision_support(const PrecisionEntry& entry, const std::string& accelerator,
                             const MachineCaps& caps) {
  const SupportCell cell = precision_support(entry, kind_of(accelerator, caps), caps);
  if (cell.support == Support::kNo) {
    fail("precision",
         "precision '{}' cannot run on accelerator '{}': {}; use accelerator='cpu' or 'auto' "
         "(--accelerator cpu|auto) "
         "(`mantissa info` shows what runs where)",
         entry.name, accelerator, cell.reason);
  }
  if (cell.support != Support::kEmulated) return;
  if (entry.math == PrecisionMath::kBFloat16) {
    warn_once_if_bf16_emulated();  // the kernels' warning, shared with the apps
    return;
  }
  // The 4-bit modes are emulated only in their default bf16 compute dtype, which the plugin
  // may be given otherwise (--quant-dtype fp32), so no warning here; `mantissa info` says it.
  if (entry.math == PrecisionMath::kInt4) return;
  // The transformer-engine plugin says it once a layer runs in FP8
  // (TransformerEngineOptions::emulation_warning).
  if (entry.math == PrecisionMath::kFloat8) return;
  warn_once(emulation_warning(entry, accelerator, caps));
}

}  // namespace mantissa::train
