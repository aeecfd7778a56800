// TensorDataset and DataLoader: batch counts, contents, shuffling per seed and epoch.
#include "mantissa/data/dataloader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "data/idx_fixtures.h"
#include "mantissa/core/generator.h"

namespace mantissa::data {
namespace {
using testing::expect_error_with;

// n examples: input row i is {3i, 3i+1, 3i+2} (float32), target i (int64).
std::shared_ptr<TensorDataset> numbered(int64_t n) {
  return std::make_shared<TensorDataset>(arange(0, 3 * n, 1, kFloat32).reshape({n, 3}), arange(n));
}

// Targets of every batch of one pass, checking inputs match their targets.
std::vector<std::vector<int64_t>> pass(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Example& b : loader) {
    const auto t = b.target.to_vector<int64_t>();
    const auto x = b.input.to_vector<double>();
    EXPECT_EQ(b.input.shape(), (Shape{static_cast<int64_t>(t.size()), 3}));
    for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(x[3 * i + 1], 3.0 * t[i] + 1);
    out.push_back(t);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST(DataLoader, BatchCountsWithAndWithoutDropLast) {
  auto ds = numbered(10);
  struct Case {
    int64_t batch;
    bool drop_last;
    int64_t batches;
  };
  for (const Case& c : {Case{3, false, 4}, Case{3, true, 3}, Case{5, false, 2}, Case{5, true, 2},
                        Case{1, false, 10}, Case{20, false, 1}, Case{20, true, 0}}) {
    DataLoader loader(ds, c.batch, /*shuffle=*/true, /*seed=*/1, c.drop_last);
    EXPECT_EQ(loader.size(), c.batches) << c.batch << " " << c.drop_last;
    const auto batches = pass(loader);
    ASSERT_EQ(static_cast<int64_t>(batches.size()), c.batches);
    for (size_t b = 0; b < batches.size(); ++b) {
      const bool last = b + 1 == batches.size();
      const int64_t expected = last && !c.drop_last && 10 % c.batch ? 10 % c.batch : c.batch;
      EXPECT_EQ(static_cast<int64_t>(batches[b].size()), std::min<int64_t>(expected, 10));
    }
  }
  EXPECT_EQ(DataLoader(numbered(0), 4).size(), 0);
  // The largest batch size is one batch of everything (the count must not overflow to 0).
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(DataLoader(ds, huge).size(), 1);
  EXPECT_EQ(DataLoader(ds, huge, /*shuffle=*/false, 0, /*drop_last=*/true).size(), 0);
  DataLoader everything(ds, huge, /*shuffle=*/true, 1);
  EXPECT_EQ(pass(everything).front().size(), 10u);
}

TEST(DataLoader, SequentialWithoutShuffle) {
  DataLoader loader(numbered(7), 3);
  const auto batches = pass(loader);
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(pass(loader), batches);  // every epoch the same
}

TEST(DataLoader, ShuffleIsAPermutationPerEpochAndReproducible) {
  const int64_t n = 50;
  auto ds = numbered(n);
  DataLoader a(ds, 8, true, /*seed=*/42);
  DataLoader b(ds, 8, true, /*seed=*/42);
  DataLoader other_seed(ds, 8, true, /*seed=*/43);

  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(a.epoch(), e);
    const auto order = flat(pass(a));
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity) << "epoch " << e;  // each index exactly once
    EXPECT_NE(order, identity);
    EXPECT_EQ(order, flat(pass(b))) << "same seed, same epoch";
    EXPECT_NE(order, flat(pass(other_seed))) << "other seed";
    EXPECT_EQ(order, a.indices(e));
    epochs.push_back(order);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);

  // The order is a Generator(seed + epoch) permutation, so a resumed run recovers it.
  Generator g(42 + 2);
  EXPECT_EQ(epochs[2], randperm(n, &g).to_vector<int64_t>());
  DataLoader resumed(ds, 8, true, 42);
  resumed.set_epoch(2);
  EXPECT_EQ(flat(pass(resumed)), epochs[2]);
  EXPECT_EQ(resumed.epoch(), 3);
}

TEST(DataLoader, DropLastDropsTheTailOfTheShuffledOrder) {
  DataLoader loader(numbered(10), 4, true, 7, /*drop_last=*/true);
  const auto order = loader.indices(0);
  EXPECT_EQ(flat(pass(loader)), std::vector<int64_t>(order.begin(), order.begin() + 8));
}

// A dataset computing its examples: batches come from the default stacking get_batch.
class Squares : public Dataset {
 public:
  int64_t size() const override { return 5; }
  Example get(int64_t i) const override {
    return {tensor<double>({double(i), double(i * i)}, {2}), scalar_tensor(double(i), kInt64)};
  }
};

TEST(DataLoader, GenericDatasetsAreStacked) {
  DataLoader loader(std::make_shared<Squares>(), 2);
  std::vector<Example> batches(loader.begin(), loader.end());
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].input.shape(), (Shape{2, 2}));
  EXPECT_EQ(batches[1].input.to_vector<double>(), (std::vector<double>{2, 4, 3, 9}));
  EXPECT_EQ(batches[1].target.shape(), (Shape{2}));
  EXPECT_EQ(batches[1].target.dtype(), kInt64);
  EXPECT_EQ(batches[2].target.to_vector<int64_t>(), (std::vector<int64_t>{4}));
}

TEST(DataTensorDataset, GetGatherAndErrors) {
  auto ds = numbered(4);
  EXPECT_EQ(ds->get(2).input.to_vector<double>(), (std::vector<double>{6, 7, 8}));
  EXPECT_EQ(ds->get(2).target.item(), 2.0);
  const Example b = ds->get_batch({3, 0, 3});
  EXPECT_EQ(b.input.to_vector<double>(), (std::vector<double>{9, 10, 11, 0, 1, 2, 9, 10, 11}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 3}));
  expect_error_with([&] { ds->get(4); }, {"index 4 out of range for 4 examples"});
  expect_error_with([&] { ds->get_batch({0, -1}); }, {"index -1 out of range"});
  expect_error_with(
      [&] {
        TensorDataset(zeros({3, 2}), zeros({4}));
      },
      {"[3, 2]", "[4]", "number of examples"});
  expect_error_with([&] { DataLoader(ds, 0); }, {"batch_size should be a positive integer"});
  // Non-contiguous inputs are made contiguous once.
  TensorDataset t(arange(6, kFloat32).reshape({2, 3}).t(), arange(3));
  EXPECT_EQ(t.get_batch({2}).input.to_vector<double>(), (std::vector<double>{2, 5}));
}

// Batches above the parallel copy threshold (1 MB) are gathered with several threads.
TEST(DataTensorDataset, LargeBatchGather) {
  const int64_t n = 3000, width = 200;
  TensorDataset ds(arange(0, n * width, 1, kFloat32).reshape({n, width}), arange(n));
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = (i * 7) % n;
  const Example b = ds.get_batch(idx);
  const float* x = b.input.data<float>();
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(x[i * width + 5], idx[i] * width + 5);
}

}  // namespace
}  // namespace mantissa::data
