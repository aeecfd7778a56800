// The sanity check before training runs at most the validation batches that limit_val_batches
// leaves, as Lightning's min(num_sanity_val_steps, number of validation batches): never
// batches no validation of the run reads (the whole loader for -1).
#include <gtest/gtest.h>

#include <algorithm>

#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

// validation_step calls before the first training_step: the sanity check's batches.
int64_t sanity_batches(int64_t num_sanity_val_steps, BatchLimit limit_val_batches) {
  std::vector<std::string> events;
  TinyModule module(TinyOptions{.events = &events});
  TrainerOptions o = quiet_options();
  o.num_sanity_val_steps = num_sanity_val_steps;
  o.limit_val_batches = limit_val_batches;
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);
  data::DataLoader val(testing::tiny_dataset(32, 7), 8);  // 4 validation batches
  trainer.fit(module, train, &val);
  const auto first_train = std::find(events.begin(), events.end(), "module:training_step");
  return std::count(events.begin(), first_train, "module:validation_step");
}

TEST(SanityCheck, RunsNoMoreBatchesThanLimitValBatchesLeaves) {
  EXPECT_EQ(sanity_batches(2, BatchLimit::batches(1)), 1);
  EXPECT_EQ(sanity_batches(3, BatchLimit::fraction(0.5)), 2);
  EXPECT_EQ(sanity_batches(-1, BatchLimit::batches(1)), 1);  // -1: the limited loader
  EXPECT_EQ(sanity_batches(-1, BatchLimit::fraction(0.5)), 2);
  // Within the limit the setting counts, as before.
  EXPECT_EQ(sanity_batches(2, BatchLimit::batches(3)), 2);
  EXPECT_EQ(sanity_batches(-1, BatchLimit()), 4);
}

}  // namespace
}  // namespace mantissa::train
