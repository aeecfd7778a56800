#include <cstdlib>

#include "kernels/cpu/onednn/onednn_common.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {
namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// oneDNN's ladder of x86 ISAs, the highest rung whose instructions the features cover.
dnnl::cpu_isa widest_isa(const CpuFeatures& f) {
  if (!f.avx2 || !f.fma) return dnnl::cpu_isa::sse41;
  if (!f.avx512f || !f.avx512bw || !f.avx512vl) return dnnl::cpu_isa::avx2;
  if (!f.avx512_vnni) return dnnl::cpu_isa::avx512_core;
  if (!f.avx512_bf16) return dnnl::cpu_isa::avx512_core_vnni;
  if (!f.amx_bf16) return dnnl::cpu_isa::avx512_core_bf16;
  return dnnl::cpu_isa::all;
}

}  // namespace

void limit_onednn_isa_to_cpu_features() {
  static const bool once = [] {
    // Capped when MANTISSA_DISABLE_SIMD lowered the features, or the CPU's AVX-512 BF16 was set
    // aside (cpu_features.h): oneDNN would otherwise still run bf16 primitives on it.
    const bool lowered = env_set("MANTISSA_DISABLE_SIMD") || avx512_bf16_set_aside();
    if (!lowered || env_set("ONEDNN_MAX_CPU_ISA") || env_set("DNNL_MAX_CPU_ISA")) return true;
    const dnnl::cpu_isa isa = widest_isa(cpu_features());
    // Fails only when oneDNN has already fixed its ISA; its own dispatch then stays as it is.
    if (isa != dnnl::cpu_isa::all) dnnl_set_max_cpu_isa(static_cast<dnnl_cpu_isa_t>(isa));
    return true;
  }();
  (void)once;
}

}  // namespace mantissa::kernels
