// CPU identification: AMD's family/model ranges map to the right Zen generation, and the
// running CPU's identity is consistent with CPUID.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mantissa
