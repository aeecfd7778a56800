// The batches of an optimizer step under an item-weighted loss (TrainModule::loss_items): the
// step's items counted before its first batch trains, over the ranks when
// average_items_across_ranks asks, as transformers' Trainer counts num_items_in_batch.
#include <algorithm>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

data::Example Trainer::next_training_batch(const data::DataLoader& loader,
                                           const std::vector<int64_t>& order, int64_t b,
                                           int64_t n) {
  if (!step_batches_.empty()) {
    data::Example next = std::move(step_batches_.front());
    step_batches_.pop_front();
    return next;
  }
  data::Example first = loader.batch(order, b);
  const std::optional<int64_t> first_items = module_->loss_items(first);
  item_weighted_ =
      first_items.has_value() && module_->automatic_optimization && !options_.cuda_graphs;
  if (!item_weighted_) return first;
  // The step's batches: up to the window's end (an epoch's last batch always steps).
  const int64_t accum = options_.accumulate_grad_batches;
  const int64_t end = std::min(n, (b / accum + 1) * accum);
  auto items_of = [](const std::optional<int64_t>& items) {
    MANTISSA_CHECK(items.has_value() && *items >= 0, "Trainer",
                   "loss_items must give every batch a count of 0 or more (it gave the first "
                   "batch of this optimizer step one)");
    return static_cast<double>(*items);
  };
  double items = items_of(first_items);
  for (int64_t j = b + 1; j < end; ++j) {
    step_batches_.push_back(loader.batch(order, j));
    items += items_of(module_->loss_items(step_batches_.back()));
  }
  const int world = options_.average_items_across_ranks ? strategy_->world_size() : 1;
  if (world > 1) {
    std::vector<double> count = {items};
    strategy_->sum_over_ranks(count);
    items = count[0];
  }
  // No item in the whole step: every share is a sum over no item, 0 whatever the scale.
  item_loss_scale_ = items > 0 ? static_cast<double>(world) / items : 0.0;
  return first;
}

}  // namespace mantissa::train
