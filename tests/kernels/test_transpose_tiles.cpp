// The buffer transposes of the column-wise casts (kernels/cpu/mx/transpose_tiles.h): the tiles
// moved in registers and the element-by-element edges equal the plain loop for 2- and 4-byte
// elements, shapes cut at every edge, nothing past the block written.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/mx/transpose_tiles.h"

namespace mantissa::kernels::mx {
namespace {

template <typename T>
void check_shapes() {
  for (int64_t rows : {1, 4, 7, 8, 16, 23, 128}) {
    for (int64_t cols : {1, 3, 8, 9, 16, 37}) {
      const int64_t ld_src = cols + 5, ld_dst = rows + 3;
      std::vector<T> src(static_cast<size_t>(rows * ld_src));
      std::iota(src.begin(), src.end(), T{1});
      std::vector<T> dst(static_cast<size_t>(cols * ld_dst), T{0});
      transpose_block_bytes(src.data(), sizeof(T), ld_src, rows, cols, dst.data(), ld_dst);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(dst[c * ld_dst + r], src[r * ld_src + c]) << rows << "x" << cols;
        for (int64_t r = rows; r < ld_dst; ++r) ASSERT_EQ(dst[c * ld_dst + r], T{0});
      }
    }
  }
}

TEST(TransposeTiles, SixteenBitElementsEqualTheLoopAtEveryEdge) { check_shapes<uint16_t>(); }
TEST(TransposeTiles, ThirtyTwoBitElementsEqualTheLoopAtEveryEdge) { check_shapes<uint32_t>(); }

}  // namespace
}  // namespace mantissa::kernels::mx
