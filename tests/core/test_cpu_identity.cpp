// CPU identification: AMD's family/model ranges map to the right Zen generation, and the
// running CPU's identity is consistent with CPUID.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "mantissa/core/cpu_identity.h"

namespace mantissa {
namespace {

TEST(CpuIdentity, ZenGenerationsFromFamilyAndModel) {
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x17, 0x01), "Zen / Zen+");
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x17, 0x31), "Zen 2");
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x19, 0x01), "Zen 3");  // Milan
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x19, 0x11), "Zen 4");  // Genoa
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x19, 0x61), "Zen 4");  // Raphael
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x19, 0x21), "Zen 3");  // Vermeer
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x1a, 0x02), "Zen 5");  // Turin
  EXPECT_EQ(microarchitecture_of("GenuineIntel", 0x19, 0x11), "");
  EXPECT_EQ(microarchitecture_of("AuthenticAMD", 0x15, 0x02), "");
}

TEST(CpuIdentity, DescribesTheRunningCpu) {
  const CpuIdentity& id = cpu_identity();
#if defined(__x86_64__)
  EXPECT_EQ(id.vendor.size(), 12u);
  EXPECT_GE(id.family, 6);
  const std::string line = describe_cpu();
  EXPECT_NE(line.find(id.vendor), std::string::npos) << line;
  EXPECT_NE(line.find("family " + std::to_string(id.family)), std::string::npos) << line;
  EXPECT_EQ(id.microarchitecture, microarchitecture_of(id.vendor, id.family, id.model));
#else
  EXPECT_EQ(describe_cpu(), "unknown (not x86)");
#endif
}

// The L1 data cache from CPUID agrees with the kernel's view of it (Linux sysfs, which the
// kernel also fills from CPUID, but through its own decoding).
TEST(CpuIdentity, L1DataCacheMatchesTheKernelsView) {
  const CpuIdentity& id = cpu_identity();
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/";
  for (int i = 0; i < 8; ++i) {
    const std::string index = dir + "index" + std::to_string(i) + "/";
    std::ifstream level(index + "level"), type(index + "type"),
        ways(index + "ways_of_associativity"), size(index + "size");
    int lv = 0, w = 0;
    std::string ty, sz;
    if (!(level >> lv) || !(type >> ty)) break;
    if (lv != 1 || ty != "Data") continue;
    if (!(ways >> w) || !(size >> sz)) break;
    EXPECT_EQ(id.l1d_ways, w);
    EXPECT_EQ(std::to_string(id.l1d_kib) + "K", sz);
    return;
  }
#if defined(__x86_64__)
  if (id.l1d_ways != 0) {  // no sysfs entry (a container without it): at least plausible
    EXPECT_GE(id.l1d_ways, 2);
    EXPECT_LE(id.l1d_ways, 32);
    EXPECT_GE(id.l1d_kib, 16);
  }
#endif
  GTEST_SKIP() << "no L1 data cache in " << dir;
}

}  // namespace
}  // namespace mantissa
