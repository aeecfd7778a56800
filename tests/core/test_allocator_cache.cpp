// The caching allocator: large freed blocks are reused, memory_allocated() keeps counting only
// what tensors hold, empty_cache() and a zero limit give memory back, the env value parses, and
// concurrent allocation keeps the counters straight, and blocks of 32 MiB and more lie on
// transparent huge pages.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mantissa/core/allocator.h"
#include "mantissa/core/allocator_cache.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

// Restores the cache limit a test changed.
class CacheLimitGuard {
 public:
  CacheLimitGuard() : saved_(allocator_cache_limit()) {}
  ~CacheLimitGuard() { set_allocator_cache_limit(saved_); }

 private:
  int64_t saved_;
};

constexpr size_t kBig = size_t{1} << 20;

TEST(AllocatorCache, FreedLargeBlockIsReusedForTheSameSizeClass) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{64} << 20);
  void* p = allocate_bytes(kBig);
  free_bytes(p, kBig);
  void* q = allocate_bytes(kBig - 1000);  // same size class (within a sixteenth)
  EXPECT_EQ(q, p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % kAllocAlignment, 0u);
  free_bytes(q, kBig - 1000);
}

// The kernel's transparent huge page mode, or "" where the kernel has none.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  const auto open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos
             ? std::string()
             : line.substr(open + 1, close - open - 1);
}

// The "THPeligible" field of the mapping that holds `p` in /proc/self/smaps, or -1.
int thp_eligible(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(f, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= addr && addr < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

// A 5 MiB block: its first two 2 MiB pages are advised as huge pages, its last 1 MiB is not,
// so a tail short of a whole huge page never makes a 2 MiB page resident. Under
// MANTISSA_HUGE_PAGES=0 (ctest's allocator.huge_pages_off) nothing is advised.
TEST(AllocatorCache, LargeBlocksLieOnHugePagesAdvisedToTheKernel) {
  const char* env = std::getenv("MANTISSA_HUGE_PAGES");
  const bool off = env != nullptr && std::string(env) == "0";
  const std::string mode = thp_mode();
  if (mode != "madvise" && !(mode == "always" && !off))
    GTEST_SKIP() << "the kernel's transparent huge pages are '" << mode << "'";
  constexpr size_t kHuge = size_t{2} << 20;
  for (const size_t bytes : {size_t{5} << 20, size_t{40} << 20}) {
    auto* p = static_cast<unsigned char*>(allocate_bytes(bytes));
    std::memset(p, 1, bytes);
    if (off) {
      EXPECT_EQ(thp_eligible(p), 0) << bytes << " bytes under MANTISSA_HUGE_PAGES=0";
    } else {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHuge, 0u) << bytes;
      EXPECT_EQ(thp_eligible(p), 1) << bytes << " bytes, transparent_hugepage " << mode;
      if (mode == "madvise" && bytes % kHuge != 0) {
        EXPECT_EQ(thp_eligible(p + bytes / kHuge * kHuge), 0) << "the tail of " << bytes;
      }
    }
    free_bytes(p, bytes);
  }
}

// Blocks of up to 512 bytes come from malloc, aligned by hand: every size and every one of
// many live blocks must still be 64-byte aligned, writable over its whole length, counted at
// its requested size and returned whole (valgrind memcheck runs this too).
TEST(AllocatorCache, SmallBlocksAreAlignedWritableAndCounted) {
  const int64_t before = memory_allocated(), live = allocation_count();
  std::vector<std::pair<void*, size_t>> blocks;
  int64_t requested = 0;
  for (size_t n = 1; n <= 600; n += 7) {
    void* p = allocate_bytes(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAllocAlignment, 0u) << n;
    std::memset(p, 0xab, n);
    blocks.emplace_back(p, n);
    requested += static_cast<int64_t>(n);
  }
  EXPECT_EQ(memory_allocated() - before, requested);
  for (auto [p, n] : blocks) {
    const auto* bytes = static_cast<const unsigned char*>(p);
    EXPECT_EQ(bytes[0], 0xab);
    EXPECT_EQ(bytes[n - 1], 0xab);
    free_bytes(p, n);
  }
  EXPECT_EQ(memory_allocated(), before);
  EXPECT_EQ(allocation_count(), live);
}

TEST(AllocatorCache, TensorsOfTheSameShapeReuseStorage) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{64} << 20);
  const void* first = nullptr;
  {
    const Tensor a = empty({512, 512}, kFloat32);
    first = a.data_ptr();
  }
  const Tensor b = empty({512, 512}, kFloat32);
  EXPECT_EQ(b.data_ptr(), first);
}

TEST(AllocatorCache, MemoryAllocatedCountsTensorBytesNotCachedOnes) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{64} << 20);
  const int64_t before = memory_allocated();
  const int64_t count = allocation_count();
  void* p = allocate_bytes(kBig + 3);
  EXPECT_EQ(memory_allocated(), before + static_cast<int64_t>(kBig + 3));
  EXPECT_GE(memory_reserved(), static_cast<int64_t>(kBig + 3));
  const int64_t reserved = memory_reserved();
  free_bytes(p, kBig + 3);
  EXPECT_EQ(memory_allocated(), before);
  EXPECT_EQ(allocation_count(), count);
  EXPECT_EQ(memory_reserved(), reserved);  // kept in the cache
  empty_cache();
  EXPECT_LT(memory_reserved(), reserved - static_cast<int64_t>(kBig));
}

TEST(AllocatorCache, PeakIgnoresCachedBlocks) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{64} << 20);
  void* warm = allocate_bytes(kBig);
  free_bytes(warm, kBig);  // now cached
  reset_peak_memory_stats();
  const int64_t base = memory_allocated();
  void* p = allocate_bytes(kBig);
  free_bytes(p, kBig);
  EXPECT_EQ(max_memory_allocated(), base + static_cast<int64_t>(kBig));
}

TEST(AllocatorCache, ZeroLimitDisablesCaching) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(0);
  EXPECT_EQ(allocator_cache_limit(), 0);
  const int64_t reserved = memory_reserved();
  void* p = allocate_bytes(kBig);
  EXPECT_GE(memory_reserved(), reserved + static_cast<int64_t>(kBig));
  free_bytes(p, kBig);
  EXPECT_EQ(memory_reserved(), reserved);  // straight back to the OS
}

TEST(AllocatorCache, SmallBlocksAreNotCached) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{64} << 20);
  empty_cache();
  const int64_t reserved = memory_reserved();
  void* p = allocate_bytes(kCacheMinBytes - 64);
  free_bytes(p, kCacheMinBytes - 64);
  EXPECT_EQ(memory_reserved(), reserved);
}

TEST(AllocatorCache, LimitBoundsTheCachedBytes) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(static_cast<int64_t>(kBig + kBig / 2));
  const int64_t reserved = memory_reserved();
  void* a = allocate_bytes(kBig);
  void* b = allocate_bytes(kBig);
  free_bytes(a, kBig);
  free_bytes(b, kBig);  // does not fit: freed
  EXPECT_EQ(memory_reserved(), reserved + static_cast<int64_t>(kBig));
  empty_cache();
}

TEST(AllocatorCache, EnvValueIsMebibytes) {
  EXPECT_EQ(parse_allocator_cache_env("0"), 0);
  EXPECT_EQ(parse_allocator_cache_env("256"), int64_t{256} << 20);
  EXPECT_EQ(parse_allocator_cache_env("-1"), std::nullopt);
  EXPECT_EQ(parse_allocator_cache_env("1G"), std::nullopt);
  EXPECT_EQ(parse_allocator_cache_env(""), std::nullopt);
}

TEST(AllocatorCache, ConcurrentAllocationKeepsTheCountersStraight) {
  CacheLimitGuard guard;
  set_allocator_cache_limit(int64_t{8} << 20);  // small, so blocks also go back to the OS
  const int64_t before = memory_allocated();
  const int64_t count = allocation_count();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<std::pair<void*, size_t>> live;
      for (int i = 0; i < 500; ++i) {
        const size_t n = (size_t{64} << 10) * static_cast<size_t>(1 + (i * 7 + t) % 13) + 64 * i;
        void* p = allocate_bytes(n);
        static_cast<unsigned char*>(p)[n - 1] = 1;  // the block really has n bytes
        live.emplace_back(p, n);
        if (i % 3 != 0) {
          free_bytes(live.front().first, live.front().second);
          live.erase(live.begin());
        }
      }
      for (auto [p, n] : live) free_bytes(p, n);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(memory_allocated(), before);
  EXPECT_EQ(allocation_count(), count);
  empty_cache();
}

}  // namespace
}  // namespace mantissa
