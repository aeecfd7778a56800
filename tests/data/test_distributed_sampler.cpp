// DistributedSampler: shards, padding / dropping, the same per-epoch order on every rank, and
// the promise the equivalence tests rest on (N ranks' batch b == one process's batch b of N*B).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "mantissa/data/dataloader.h"
#include "mantissa/data/distributed_sampler.h"
#include "mantissa/mantissa.h"

using namespace mantissa;
using data::DistributedSampler;

TEST(DistributedSampler, PadsWithTheOrdersFirstIndicesUnshuffled) {
  // 10 examples over 3 ranks: 4 each, the 2 missing taken from the start of the order.
  std::vector<std::vector<int64_t>> got;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.num_samples(), 4);
    EXPECT_EQ(s.total_size(), 12);
    got.push_back(s.indices());
  }
  EXPECT_EQ(got[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(got[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(got[2], (std::vector<int64_t>{2, 5, 8, 1}));
}

TEST(DistributedSampler, DropLastDropsTheTail) {
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/true, /*seed=*/5, /*drop_last=*/true);
    EXPECT_EQ(s.num_samples(), 3);
    for (int64_t i : s.indices()) EXPECT_TRUE(seen.insert(i).second) << "index read twice: " << i;
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(DistributedSampler, UnrepeatedReadsEveryExampleOnceWithUnevenShards) {
  // Evaluation's sampler: 10 examples over 3 ranks are 4, 3 and 3, nothing padded, so sums
  // over the shards are the whole set's; 2 examples over 5 ranks leave ranks 2..4 empty.
  std::vector<std::vector<int64_t>> got;
  for (int r = 0; r < 3; ++r) {
    const DistributedSampler s = DistributedSampler::unrepeated(10, 3, r);
    EXPECT_FALSE(s.repeats());
    EXPECT_EQ(s.num_samples(), r == 0 ? 4 : 3);
    EXPECT_EQ(s.total_size(), 10);
    got.push_back(s.indices());
    EXPECT_EQ(static_cast<int64_t>(got.back().size()), s.num_samples());
  }
  EXPECT_EQ(got[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(got[1], (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(got[2], (std::vector<int64_t>{2, 5, 8}));
  for (int r = 0; r < 5; ++r) {
    const DistributedSampler s = DistributedSampler::unrepeated(2, 5, r);
    EXPECT_EQ(s.indices(), r < 2 ? std::vector<int64_t>{r} : std::vector<int64_t>{});
  }
  // Shuffled: the loader's permutation, shared out without repeats.
  std::multiset<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    for (int64_t i : DistributedSampler::unrepeated(11, 4, r, true, 7).indices(2)) all.insert(i);
  }
  EXPECT_EQ(all.size(), 11u);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 11u);
}

TEST(DistributedSampler, PaddingLongerThanTheData) {
  // 2 examples over 5 ranks: every rank gets one, the order repeated.
  for (int r = 0; r < 5; ++r) {
    DistributedSampler s(2, 5, r, false);
    EXPECT_EQ(s.indices(), (std::vector<int64_t>{r % 2}));
  }
}

TEST(DistributedSampler, EveryRankSeesTheLoadersPermutationAndEpochsDiffer) {
  const int64_t n = 24;
  auto ds = std::make_shared<data::TensorDataset>(zeros({n, 2}), zeros({n}, kInt64));
  data::DataLoader single(ds, 8, /*shuffle=*/true, /*seed=*/7);
  for (int64_t epoch : {0, 1, 2}) {
    const std::vector<int64_t> order = single.indices(epoch);
    for (int r = 0; r < 2; ++r) {
      DistributedSampler s(n, 2, r, true, 7);
      s.set_epoch(epoch);
      const auto mine = s.indices();
      ASSERT_EQ(mine.size(), 12u);
      for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], order[i * 2 + r]);
      EXPECT_EQ(mine, s.indices(epoch));
    }
  }
  DistributedSampler s(n, 2, 0, true, 7);
  EXPECT_NE(s.indices(0), s.indices(1));
}

TEST(DistributedSampler, RanksBatchesTogetherAreTheSingleProcessBatch) {
  // 2 ranks x batch 4 == 1 process x batch 8, batch by batch (as sets).
  const int64_t n = 32;
  auto ds = std::make_shared<data::TensorDataset>(arange(0, n, 1, kFloat32).reshape({n, 1}),
                                                  zeros({n}, kInt64));
  data::DataLoader single(ds, 8, true, 3);
  std::vector<data::DataLoader> ranks;
  for (int r = 0; r < 2; ++r) {
    data::DataLoader l(ds, 4, true, 3);
    l.set_sampler(std::make_shared<DistributedSampler>(n, 2, r, true, 3));
    EXPECT_EQ(l.size(), 4);
    ranks.push_back(l);
  }
  const auto order = single.indices(1);
  for (int64_t b = 0; b < single.size(); ++b) {
    auto want = single.batch(order, b).input.to_vector<float>();
    std::vector<float> got;
    for (auto& l : ranks) {
      auto part = l.batch(l.indices(1), b).input.to_vector<float>();
      got.insert(got.end(), part.begin(), part.end());
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "batch " << b;
  }
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  auto ds = std::make_shared<data::TensorDataset>(zeros({4, 1}), zeros({4}, kInt64));
  data::DataLoader l(ds, 2);
  EXPECT_THROW(l.set_sampler(std::make_shared<DistributedSampler>(5, 2, 0)), Error);
}
