// Run-time CPU feature detection from CPUID, with the OS check (XGETBV) that the wide register
// state is actually saved on context switches; without it AVX/AVX-512 instructions fault.
#include "mantissa/core/cpu_features.h"

#include <fmt/format.h>

#include "mantissa/core/cpu_identity.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MANTISSA_X86 1
#endif

namespace mantissa {
namespace {

#ifdef MANTISSA_X86
struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// XGETBV via inline asm: _xgetbv needs the xsave target, which the baseline build lacks.
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

constexpr bool bit(uint32_t v, int b) { return ((v >> b) & 1u) != 0; }

CpuFeatures detect() {
  CpuFeatures f;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  const bool avx = bit(l1.ecx, 28);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  // XCR0 bits 1-2: SSE and AVX (YMM) state; 5-7: opmask, ZMM0-15 upper halves, ZMM16-31;
  // 17-18: AMX tile config and data.
  const bool os_avx = avx && (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;

  f.fma = os_avx && bit(l1.ecx, 12);
  f.f16c = os_avx && bit(l1.ecx, 29);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = os_avx && bit(l7.ebx, 5);
    f.avx512f = os_avx512 && bit(l7.ebx, 16);
    f.avx512bw = f.avx512f && bit(l7.ebx, 30);
    f.avx512vl = f.avx512f && bit(l7.ebx, 31);
    f.avx512_fp16 = f.avx512f && bit(l7.edx, 23);
    f.avx512_vnni = f.avx512f && bit(l7.ecx, 11);
    f.avx512_vbmi = f.avx512f && bit(l7.ecx, 1);
    // Linux also requires arch_prctl(ARCH_REQ_XCOMP_PERM) before a process touches AMX tiles;
    // whoever adds AMX kernels must request it. Here we only report the capability.
    f.amx_bf16 = os_amx && bit(l7.edx, 22);
    if (l7.eax >= 1) {
      const Regs l71 = cpuid(7, 1);
      f.avx512_bf16 = f.avx512f && bit(l71.eax, 5);
    }
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

struct Field {
  std::string_view name;
  bool CpuFeatures::*member;
};

constexpr Field kFields[] = {
    {"avx2", &CpuFeatures::avx2},
    {"fma", &CpuFeatures::fma},
    {"f16c", &CpuFeatures::f16c},
    {"avx512f", &CpuFeatures::avx512f},
    {"avx512bw", &CpuFeatures::avx512bw},
    {"avx512vl", &CpuFeatures::avx512vl},
    {"avx512_bf16", &CpuFeatures::avx512_bf16},
    {"avx512_fp16", &CpuFeatures::avx512_fp16},
    {"avx512_vnni", &CpuFeatures::avx512_vnni},
    {"avx512_vbmi", &CpuFeatures::avx512_vbmi},
    {"amx_bf16", &CpuFeatures::amx_bf16},
};

// "AVX512-BF16", "avx512bf16" and "avx512_bf16" all name the same feature.
std::string normalize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == '-' || std::isspace(static_cast<unsigned char>(c))) continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

CpuFeatures disable_simd_features(CpuFeatures f, std::string_view list) {
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = normalize(list.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    if (item == "all") return CpuFeatures{};
    bool known = false;
    for (const Field& field : kFields) {
      if (normalize(field.name) == item) {
        f.*field.member = false;
        known = true;
      }
    }
    if (!known) {
      std::fprintf(stderr, "mantissa: MANTISSA_DISABLE_SIMD: ignoring unknown feature '%s'\n",
                   item.c_str());
    }
  }
  // Every CPU with AVX-512 has AVX2, FMA and F16C, and the AVX-512 kernels use them in their
  // tails and conversions: turning one of those off models a CPU without AVX-512 as well.
  if (!f.avx2 || !f.fma || !f.f16c) f.avx512f = false;
  // The AVX-512 extensions are unusable without the foundation.
  if (!f.avx512f)
    f.avx512bw = f.avx512vl = f.avx512_bf16 = f.avx512_fp16 = f.avx512_vnni = f.avx512_vbmi = false;
  // AMX comes only with AVX-512 BF16 (Sapphire Rapids and later), and its kernels convert with
  // it: turning AVX-512 (or its BF16) off models a CPU without AMX, as it does on a real one.
  if (!f.avx512_bf16) f.amx_bf16 = false;
  return f;
}

bool bf16_dot_products_pay(const CpuFeatures& f, std::string_view vendor) {
  return f.amx_bf16 || vendor != "GenuineIntel";
}

namespace {

// The features MANTISSA_DISABLE_SIMD leaves, before the vendor policy.
const CpuFeatures& features_allowed() {
  static const CpuFeatures features = [] {
    CpuFeatures f = detect();
    if (const char* env = std::getenv("MANTISSA_DISABLE_SIMD")) f = disable_simd_features(f, env);
    return f;
  }();
  return features;
}

bool use_avx512_bf16_forced() {
  const char* v = std::getenv("MANTISSA_USE_AVX512_BF16");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace

bool avx512_bf16_set_aside() {
  static const bool set_aside = [] {
    const CpuFeatures& f = features_allowed();
    return f.avx512_bf16 && !use_avx512_bf16_forced() &&
           !bf16_dot_products_pay(f, cpu_identity().vendor);
  }();
  return set_aside;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = features_allowed();
    if (avx512_bf16_set_aside()) f.avx512_bf16 = false;  // amx_bf16 is already off here
    return f;
  }();
  return features;
}

std::string describe_cpu_features() {
  const CpuFeatures& f = cpu_features();
  // What the CPU has, before MANTISSA_DISABLE_SIMD: a feature it turned off is named as such,
  // so that a capped run (or a shell that still exports the variable) is not read as a CPU
  // without it.
  static const CpuFeatures detected = detect();
  std::string out;
  for (const Field& field : kFields) {
    out += field.name;
    if (f.*field.member)
      out += ": yes\n";
    else if (field.member == &CpuFeatures::avx512_bf16 && avx512_bf16_set_aside())
      out += fmt::format(
          ": yes, not used ({}: bf16 products are widened to fp32; MANTISSA_USE_AVX512_BF16=1 "
          "uses it)\n",
          kAvx512Bf16SetAsideReason);
    else if (detected.*field.member)
      out += ": no (disabled by MANTISSA_DISABLE_SIMD)\n";
    else
      out += ": no\n";
  }
  return out;
}

SimdLevel simd_level() {
  static const SimdLevel level = [] {
    const CpuFeatures& f = cpu_features();
    if (f.avx512f && f.avx512bw && f.avx512vl) {
      return f.avx512_bf16 ? SimdLevel::kAvx512Bf16 : SimdLevel::kAvx512;
    }
    if (f.avx2 && f.fma && f.f16c) return SimdLevel::kAvx2;
    return SimdLevel::kScalar;
  }();
  return level;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx512Bf16:
      return "avx512_bf16";
    case SimdLevel::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace mantissa
