#include "mantissa/core/cpu_identity.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MANTISSA_X86 1
#endif

namespace mantissa {
namespace {

// Trims the padding spaces vendors put around the brand string.
std::string trimmed(const char* s) {
  std::string out(s);
  const size_t b = out.find_first_not_of(' ');
  const size_t e = out.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : out.substr(b, e - b + 1);
}

CpuIdentity detect() {
  CpuIdentity id;
#ifdef MANTISSA_X86
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid(0, eax, ebx, ecx, edx);
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.vendor = vendor;
  if (eax >= 1) {
    __cpuid(1, eax, ebx, ecx, edx);
    const int base_family = static_cast<int>((eax >> 8) & 0xf);
    const int ext_family = static_cast<int>((eax >> 20) & 0xff);
    const int base_model = static_cast<int>((eax >> 4) & 0xf);
    const int ext_model = static_cast<int>((eax >> 16) & 0xf);
    id.family = base_family == 0xf ? base_family + ext_family : base_family;
    id.model =
        (base_family == 0x6 || base_family == 0xf) ? (ext_model << 4) | base_model : base_model;
  }
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    uint32_t regs[12];
    for (uint32_t i = 0; i < 3; ++i)
      __cpuid(0x80000002 + i, regs[4 * i], regs[4 * i + 1], regs[4 * i + 2], regs[4 * i + 3]);
    char brand[49] = {};
    std::memcpy(brand, regs, 48);
    id.brand = trimmed(brand);
  }
  id.microarchitecture = microarchitecture_of(id.vendor, id.family, id.model);
  // Deterministic cache parameters: one subleaf per cache, EAX[4:0] its type (0: no more, 1:
  // data), EAX[7:5] its level, EBX ways - 1 (31:22), partitions - 1 (21:12), line - 1 (11:0),
  // ECX sets - 1. AMD reports them in the same format at 0x8000001D (topology extensions).
  const bool amd = id.vendor == "AuthenticAMD";
  const uint32_t leaf = amd ? 0x8000001D : 4;
  const uint32_t max_leaf = __get_cpuid_max(amd ? 0x80000000 : 0, nullptr);
  for (uint32_t sub = 0; max_leaf >= leaf && sub < 16; ++sub) {
    __cpuid_count(leaf, sub, eax, ebx, ecx, edx);
    const uint32_t type = eax & 0x1f, level = (eax >> 5) & 0x7;
    if (type == 0) break;
    if (type != 1 || level != 1) continue;
    const int64_t ways = ((ebx >> 22) & 0x3ff) + 1, parts = ((ebx >> 12) & 0x3ff) + 1;
    const int64_t line = (ebx & 0xfff) + 1, sets = static_cast<int64_t>(ecx) + 1;
    id.l1d_ways = static_cast<int>(ways);
    id.l1d_kib = static_cast<int>(ways * parts * line * sets / 1024);
    break;
  }
#endif
  return id;
}

}  // namespace

// AMD's published family/model ranges of the Zen generations.
std::string microarchitecture_of(std::string_view vendor, int family, int model) {
  if (vendor != "AuthenticAMD") return "";
  if (family == 0x17) return model >= 0x30 ? "Zen 2" : "Zen / Zen+";
  if (family == 0x19) {
    const bool zen4 = (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) ||
                      (model >= 0xa0 && model <= 0xaf);
    return zen4 ? "Zen 4" : "Zen 3";
  }
  if (family == 0x1a) return "Zen 5";
  return "";
}

const CpuIdentity& cpu_identity() {
  static const CpuIdentity id = detect();
  return id;
}

std::string describe_cpu() {
  const CpuIdentity& id = cpu_identity();
  if (id.vendor.empty()) return "unknown (not x86)";
  std::string out = fmt::format("{} ({} family {} model {}", id.brand.empty() ? "?" : id.brand,
                                id.vendor, id.family, id.model);
  if (!id.microarchitecture.empty()) out += ": " + id.microarchitecture;
  return out + ")";
}

}  // namespace mantissa
