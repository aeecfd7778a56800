// The allocator's memory budget (set_memory_limit): allocations beyond it throw
// OutOfMemoryError naming the budget, nothing is counted for a refused request, the guard
// restores the previous budget, and byte counts print in binary units.
#include <gtest/gtest.h>

#include "mantissa/core/allocator.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

TEST(MemoryLimit, RefusesBeyondTheBudgetAndNamesIt) {
  const int64_t held = memory_allocated();
  {
    MemoryLimitGuard budget(MemoryLimit{.bytes = 1 << 20, .exempt_bytes = held});
    ASSERT_TRUE(memory_limit().has_value());
    EXPECT_EQ(memory_limit()->bytes, 1 << 20);
    Tensor a = empty({128 * 1024}, kFloat32);  // 512 KiB: fits
    const int64_t with_a = memory_allocated();
    try {
      Tensor b = empty({160 * 1024}, kFloat32);  // 640 KiB more: 1.125 MiB > 1 MiB
      ADD_FAILURE() << "expected OutOfMemoryError";
    } catch (const OutOfMemoryError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
      EXPECT_NE(msg.find("memory budget of 1.00 MiB"), std::string::npos) << msg;
      EXPECT_NE(msg.find("allocating 640.00 KiB"), std::string::npos) << msg;
      EXPECT_NE(msg.find("mantissa plan"), std::string::npos) << msg;
    }
    EXPECT_EQ(memory_allocated(), with_a);    // the refused request is not counted
    Tensor c = empty({64 * 1024}, kFloat32);  // 256 KiB: still fits beside a
  }
  EXPECT_FALSE(memory_limit().has_value());
  Tensor big = empty({1 << 20}, kFloat32);  // no budget any more
  EXPECT_EQ(memory_allocated(), held + (int64_t{4} << 20));
}

TEST(MemoryLimit, AnOutOfMemoryErrorIsAMantissaError) {
  MemoryLimitGuard budget(MemoryLimit{.bytes = 0, .exempt_bytes = memory_allocated()});
  EXPECT_THROW(empty({16}, kFloat32), Error);
}

TEST(MemoryLimit, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(int64_t{8} << 30), "8.00 GiB");
}

}  // namespace
}  // namespace mantissa
