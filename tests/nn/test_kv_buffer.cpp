// nn::KvBuffer: appended positions equal cat's along dimension 2, are written in place while the
// buffer has room, grow by doubling up to max_positions, survive growth unchanged, and copies
// append independently.
#include <gtest/gtest.h>

#include <vector>

#include "mantissa/nn/kv_buffer.h"
#include "mantissa/ops/shape_ops.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// (batch 2, heads 3, T, head_dim 4) of distinct values for appended step `seed`.
Tensor positions(int64_t T, uint64_t seed, DType dt = kFloat32) {
  return rnd({2, 3, T, 4}, dt, seed);
}

TEST(KvBuffer, AppendsEqualCatAcrossGrowth) {
  nn::KvBuffer buffer;
  EXPECT_FALSE(buffer.defined());
  EXPECT_EQ(buffer.length(), 0);
  Tensor expected = positions(5, 1);
  buffer.append(expected);
  EXPECT_EQ(buffer.capacity(), 64);  // the minimum first buffer
  for (int64_t step = 0; step < 100; ++step) {
    const Tensor fresh = positions(1, 100 + static_cast<uint64_t>(step));
    expected = cat({expected, fresh}, 2);
    const Tensor& all = buffer.append(fresh);
    ASSERT_EQ(all.shape(), expected.shape());
    ASSERT_EQ(vals(all), vals(expected)) << "after " << step + 1 << " single positions";
  }
  EXPECT_EQ(buffer.length(), 105);
  EXPECT_EQ(buffer.capacity(), 130);  // doubled once, at position 65
}

TEST(KvBuffer, WritesInPlaceWhileItHasRoom) {
  nn::KvBuffer buffer;
  buffer.append(positions(3, 1));
  const void* first = buffer.view().data_ptr();
  const Tensor early = buffer.view();
  for (int64_t step = 0; step < 60; ++step) buffer.append(positions(1, 10 + step));
  EXPECT_EQ(buffer.view().data_ptr(), first) << "61 more positions fit the first 64";
  // A view taken earlier still reads the positions it held.
  EXPECT_EQ(vals(early), vals(buffer.view().narrow(2, 0, 3)));
  EXPECT_EQ(vals(early), vals(positions(3, 1)));
  buffer.append(positions(2, 99));  // 65 positions: a new, larger buffer
  EXPECT_NE(buffer.view().data_ptr(), first);
  EXPECT_EQ(vals(buffer.view().narrow(2, 0, 3)), vals(positions(3, 1)));
}

TEST(KvBuffer, GrowthStopsAtMaxPositions) {
  nn::KvBuffer buffer(100);
  buffer.append(positions(70, 1));
  EXPECT_EQ(buffer.capacity(), 100);  // not 140
  buffer.append(positions(30, 2));
  EXPECT_EQ(buffer.capacity(), 100);
  EXPECT_EQ(buffer.length(), 100);
  EXPECT_EQ(vals(buffer.view()), vals(cat({positions(70, 1), positions(30, 2)}, 2)));
}

TEST(KvBuffer, CopiesAppendIndependently) {
  nn::KvBuffer a;
  a.append(positions(4, 1));
  nn::KvBuffer b = a;  // a fork, as a beam search makes
  a.append(positions(1, 2));
  b.append(positions(1, 3));
  EXPECT_EQ(vals(a.view()), vals(cat({positions(4, 1), positions(1, 2)}, 2)));
  EXPECT_EQ(vals(b.view()), vals(cat({positions(4, 1), positions(1, 3)}, 2)));
}

TEST(KvBuffer, AppendsStridedViewsAndKeepsTheirDtype) {
  // A head-split view of a projection, as the attention layers append it.
  const Tensor qkv = rnd({2, 1, 3, 3, 4}, kBFloat16, 7);  // (B, T, 3, H, D)
  const Tensor keys = qkv.permute({2, 0, 3, 1, 4}).select(0, 1);
  nn::KvBuffer buffer;
  EXPECT_EQ(buffer.append(keys).dtype(), kBFloat16);
  EXPECT_EQ(vals(buffer.view()), vals(keys));
}

TEST(KvBuffer, RefusesMismatchedPositions) {
  nn::KvBuffer buffer;
  buffer.append(positions(2, 1));
  expect_error([&] { buffer.append(rnd({2, 3, 1, 5}, kFloat32, 2)); }, "does not match");
  expect_error([&] { buffer.append(positions(1, 2, kFloat64)); }, "float64");
  expect_error([&] { buffer.append(rnd({2, 3, 4}, kFloat32, 2)); }, "(batch, heads, positions");
  expect_error([&] { buffer.append(Tensor()); }, "undefined");
  EXPECT_EQ(buffer.length(), 2);  // a refused append leaves the cache as it was
}

}  // namespace
}  // namespace mantissa
