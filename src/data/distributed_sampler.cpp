#include "mantissa/data/distributed_sampler.h"

#include <numeric>

#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  MANTISSA_CHECK(num_replicas >= 1, "DistributedSampler", "num_replicas must be at least 1, got {}",
                 num_replicas);
  MANTISSA_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler",
                 "invalid rank {}, rank should be in the interval [0, {}]", rank, num_replicas - 1);
  MANTISSA_CHECK(dataset_size >= 0, "DistributedSampler", "dataset_size must be >= 0, got {}",
                 dataset_size);
  num_samples_ =
      drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

DistributedSampler DistributedSampler::unrepeated(int64_t dataset_size, int num_replicas, int rank,
                                                  bool shuffle, uint64_t seed) {
  DistributedSampler s(dataset_size, num_replicas, rank, shuffle, seed, /*drop_last=*/false);
  s.repeats_ = false;
  s.num_samples_ =
      dataset_size > rank ? (dataset_size - rank + num_replicas - 1) / num_replicas : 0;
  return s;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    // The permutation DataLoader(shuffle, seed) draws for this epoch, on every rank.
    Generator gen(seed_ + static_cast<uint64_t>(epoch));
    order = randperm(dataset_size_, &gen).to_vector<int64_t>();
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t total = total_size();
  if (!repeats_) {
    // Unrepeated: the order as it is, every example on exactly one rank.
  } else if (static_cast<int64_t>(order.size()) > total) {
    order.resize(static_cast<size_t>(total));
  } else if (!order.empty()) {
    // Pad with the order's own first indices (repeated when the padding is longer).
    const size_t n = order.size();
    for (size_t i = 0; order.size() < static_cast<size_t>(total); ++i)
      order.push_back(order[i % n]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_)
    mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace mantissa::data
