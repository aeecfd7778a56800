#pragma once
// Which processor this is (CPUID vendor, brand string, family and model), so benchmark reports
// name the chip they were measured on: peaks differ by microarchitecture (Zen 4 executes a
// 512-bit FMA in two halves, Zen 5 in one), and a VM's brand string may hide it.
#include <string>
#include <string_view>

namespace mantissa {

struct CpuIdentity {
  std::string vendor;             // "AuthenticAMD", "GenuineIntel", or "" off x86
  std::string brand;              // e.g. "AMD EPYC 9654 96-Core Processor"
  int family = 0;                 // display family (base + extended)
  int model = 0;                  // display model (extended model folded in)
  std::string microarchitecture;  // e.g. "Zen 4"; "" when not in our table
  // The level-1 data cache per core from CPUID's cache descriptors (leaf 4 on Intel, 0x8000001D
  // on AMD); 0 when not reported. Kernels that place several rows a multiple of 4 KiB apart
  // (one L1 set) need its associativity: 8 ways on Zen 2-4, 12 on Intel's cores since Ice Lake
  // and on Zen 5.
  int l1d_ways = 0;
  int l1d_kib = 0;
};

const CpuIdentity& cpu_identity();
// One line, e.g. "AMD EPYC (AuthenticAMD family 25 model 17: Zen 4)".
std::string describe_cpu();
// The AMD Zen generation of a display family/model, "" when unknown. Exposed for tests.
std::string microarchitecture_of(std::string_view vendor, int family, int model);

}  // namespace mantissa
