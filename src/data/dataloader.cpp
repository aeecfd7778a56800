// DataLoader: epoch orders and batch assembly.
#include "mantissa/data/dataloader.h"

#include <algorithm>
#include <numeric>

#include "mantissa/core/generator.h"

namespace mantissa::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle,
                       uint64_t seed, bool drop_last)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  MANTISSA_CHECK(dataset_ != nullptr, "DataLoader", "dataset is null");
  MANTISSA_CHECK(batch_size > 0, "DataLoader", "batch_size should be a positive integer, got {}",
                 batch_size);
}

void DataLoader::set_sampler(std::shared_ptr<const DistributedSampler> sampler) {
  MANTISSA_CHECK(!sampler || sampler->dataset_size() == dataset_->size(), "DataLoader",
                 "the sampler covers {} examples but the dataset has {}", sampler->dataset_size(),
                 dataset_->size());
  sampler_ = std::move(sampler);
}

int64_t DataLoader::size() const {
  const int64_t n = sampler_ ? sampler_->num_samples() : dataset_->size();
  // Not (n + batch_size - 1) / batch_size: that overflows for a batch size near INT64_MAX.
  return n / batch_size_ + (!drop_last_ && n % batch_size_ != 0 ? 1 : 0);
}

std::vector<int64_t> DataLoader::indices(int64_t epoch) const {
  if (sampler_) return sampler_->indices(epoch);
  const int64_t n = dataset_->size();
  if (!shuffle_) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    return order;
  }
  Generator gen(seed_ + static_cast<uint64_t>(epoch));
  return randperm(n, &gen).to_vector<int64_t>();
}

Example DataLoader::batch(const std::vector<int64_t>& order, int64_t b) const {
  MANTISSA_CHECK(b >= 0 && b < size(), "DataLoader", "batch {} out of range ({} batches)", b,
                 size());
  const int64_t start = b * batch_size_;
  const int64_t stop = std::min<int64_t>(start + batch_size_, static_cast<int64_t>(order.size()));
  return dataset_->get_batch(std::vector<int64_t>(order.begin() + start, order.begin() + stop));
}

DataLoader::Iterator DataLoader::begin() {
  auto order = std::make_shared<const std::vector<int64_t>>(indices(epoch_));
  ++epoch_;
  return Iterator(this, std::move(order), 0);
}

}  // namespace mantissa::data
