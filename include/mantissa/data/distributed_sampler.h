#pragma once
// DistributedSampler (torch.utils.data.DistributedSampler): which examples of an epoch one rank
// of a data-parallel job reads. Every rank draws the same permutation (seed + epoch, the order
// a DataLoader with that seed uses), makes its length a multiple of the world size, and takes
// every num_replicas-th index starting at its rank:
//
//   drop_last = false: the order is padded with its own first indices, so every example is
//                      read and a few are read twice; each rank gets ceil(n / N) examples.
//   drop_last = true:  the tail is dropped, so no example is read twice and up to N - 1 are
//                      not read this epoch; each rank gets floor(n / N) examples.
//
// Batch b of a rank with per-rank batch B then holds the examples order[(b*B + j)*N + rank],
// j < B: the N ranks' batches b together are batch b of one process with batch N*B.
#include <cstdint>
#include <vector>

namespace mantissa::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  // Lightning's UnrepeatedDistributedSampler, for evaluation: neither padded nor truncated, so
  // every example is read by exactly one rank and the shards' sums add up to the whole set's.
  // Rank r reads positions r, r + N, ... of the order: ceil((n - r) / N) examples, so the
  // shards differ by at most one example (the lower ranks hold the longer ones), and with
  // per-rank batch B the ranks' batch b together is still batch b of one process with batch N*B.
  static DistributedSampler unrepeated(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle = false, uint64_t seed = 0);

  int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }
  bool drop_last() const { return drop_last_; }
  bool repeats() const { return repeats_; }  // false: unrepeated()
  // Examples this rank reads per epoch, and all ranks together (num_samples * num_replicas;
  // the dataset's size when unrepeated).
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return repeats_ ? num_samples_ * num_replicas_ : dataset_size_; }

  // The epoch indices() uses (torch's set_epoch: call it before each epoch, or the order
  // repeats). A DataLoader given this sampler asks indices(epoch) directly.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  std::vector<int64_t> indices() const { return indices(epoch_); }
  std::vector<int64_t> indices(int64_t epoch) const;

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  bool repeats_ = true;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace mantissa::data
