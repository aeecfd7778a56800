#pragma once
// CPU features detected once at run time; kernels pick their SIMD path from these so one
// binary runs on any x86-64.
#include <string>
#include <string_view>

namespace mantissa {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool avx512_vnni = false;  // VPDPBUSD: int8 dot products (LLM.int8's product)
  bool avx512_vbmi = false;  // VPERMB/VPERMT2B: byte permutes (8-bit Adam's table decode)
  bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();

// The one SIMD level every CPU kernel family dispatches on (docs/design.md, "add a kernel for
// one CPU level"). Levels are ordered: a kernel written for a level runs on every higher one.
// kAvx2 means AVX2 + FMA + F16C; kAvx512 means AVX-512 F/BW/VL; kAvx512Bf16 adds VDPBF16PS.
enum class SimdLevel : unsigned char { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
// The widest level cpu_features() allows (so MANTISSA_DISABLE_SIMD lowers it too).
SimdLevel simd_level();
// "scalar", "avx2", "avx512", "avx512_bf16".
const char* simd_level_name(SimdLevel level);
// One line per feature, e.g. "avx512_bf16: yes".
std::string describe_cpu_features();

// Environment override for testing the portable paths on a capable machine:
// MANTISSA_DISABLE_SIMD=avx512_bf16,avx512f,... (or "all") turns features off; it is read once,
// on the first call of cpu_features().

// Intel cores without AMX (Cooper Lake; Sapphire and Emerald Rapids where a VM hides AMX) have
// AVX-512 BF16, but run its VDPBF16PS at half the rate of their fp32 FMAs (87 against 177
// GFLOP/s per core on a Xeon family 6 model 207), so bf16 products in dot products were slower
// than widened to fp32 (every model's bf16-mixed step at 0.57-0.88 of 32-true, against
// 0.83-1.12 widened; docs/performance.md, "AVX-512 BF16 on Intel cores without AMX"). There
// cpu_features() reports avx512_bf16 off, so every kernel family takes the AVX-512-without-BF16
// paths; MANTISSA_USE_AVX512_BF16=1 keeps it on. AMD's Zen 4 and 5 run VDPBF16PS at twice their
// fp32 rate, and AMX replaces the dot products where present.
// Whether this CPU's AVX-512 BF16 was set aside so (false when MANTISSA_DISABLE_SIMD or
// MANTISSA_USE_AVX512_BF16 decided).
bool avx512_bf16_set_aside();
// Why, as a clause for the messages that say so (info, warnings, the precision table, bench).
inline constexpr const char* kAvx512Bf16SetAsideReason =
    "an Intel core without AMX runs bf16 dot products at half its fp32 FMA rate";
// Whether a CPU of this vendor with these features runs bf16 dot products faster than fp32
// FMAs. Exposed for tests.
bool bf16_dot_products_pay(const CpuFeatures& f, std::string_view vendor);

// Applies such a comma-separated list to `f` (names as in CpuFeatures, case, '_' and '-'
// ignored; unknown names are reported on stderr and skipped). Turning off avx512f turns off
// the other AVX-512 extensions too. Exposed for tests.
CpuFeatures disable_simd_features(CpuFeatures f, std::string_view list);

}  // namespace mantissa
