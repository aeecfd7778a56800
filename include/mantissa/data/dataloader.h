#pragma once
// DataLoader: batches of a Dataset as stacked tensors, optionally shuffled.
//
// Shuffling is a permutation drawn from a Generator seeded with seed + epoch (as
// DistributedSampler does), so each epoch has its own order, a run is reproducible, and a
// resumed run recovers the order with set_epoch(e). Each begin() uses the current epoch and
// then advances it, so consecutive passes differ without calling set_epoch.
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "mantissa/data/dataset.h"
#include "mantissa/data/distributed_sampler.h"

namespace mantissa::data {

class DataLoader {
 public:
  // batch_size > 0. drop_last drops the last batch when it would be smaller than batch_size.
  DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle = false,
             uint64_t seed = 0, bool drop_last = false);

  // Number of batches per epoch (len(loader) in PyTorch).
  int64_t size() const;
  int64_t batch_size() const { return batch_size_; }
  const Dataset& dataset() const { return *dataset_; }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }  // the shuffle seed (order of epoch e: seed + e)
  bool drop_last() const { return drop_last_; }

  // The epoch the next begin() iterates.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // Reads one rank's shard (data-parallel training): the sampler then decides the order and
  // the length of every epoch, and the loader's own shuffle and seed are not used. The
  // sampler's dataset_size must be the dataset's size. nullptr: the whole dataset again.
  void set_sampler(std::shared_ptr<const DistributedSampler> sampler);
  const DistributedSampler* sampler() const { return sampler_.get(); }

  // Example order of an epoch (0..n-1 without shuffling; the sampler's shard with one).
  std::vector<int64_t> indices(int64_t epoch) const;
  // Batch b of an epoch's order.
  Example batch(const std::vector<int64_t>& order, int64_t b) const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Example;

    Example operator*() const { return loader_->batch(*order_, index_); }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return index_ == o.index_; }
    bool operator!=(const Iterator& o) const { return index_ != o.index_; }
    int64_t index() const { return index_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<int64_t>> order,
             int64_t index)
        : loader_(loader), order_(std::move(order)), index_(index) {}
    const DataLoader* loader_;
    std::shared_ptr<const std::vector<int64_t>> order_;
    int64_t index_;
  };

  Iterator begin();  // iterates epoch(), then advances it
  Iterator end() const { return Iterator(this, nullptr, size()); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  std::shared_ptr<const DistributedSampler> sampler_;
};

}  // namespace mantissa::data
