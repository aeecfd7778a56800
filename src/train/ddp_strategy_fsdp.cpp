// fsdp (DDPStrategy with strategy "fsdp", ZeRO stage 3): zero2 whose parameters are sharded
// too. After the optimizers are configured (and a checkpoint restored), the module's units are
// wrapped and their parameters released (detail::FsdpUnits): each rank keeps its part's values
// in the shard's slices, the same partition and OptimizerShard as zero1 / zero2. A unit is
// all-gathered before its forward and before its backward and released after each; its
// gradients are reduce-scattered once its backward is done. The shard updates the slices, and
// the next forward gathers them: a parameter element is updated exactly as under zero2.
#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/train/ddp_strategy.h"
#include "mantissa/train/train_module.h"
#include "train/fsdp_units.h"
#include "train/optimizer_shard.h"

namespace mantissa::train {

void DDPStrategy::setup_optimizers(TrainModule& module,
                                   const std::vector<std::shared_ptr<optim::Optimizer>>& opts,
                                   const Precision& plugin) {
  if (!shards_parameters_ || comm_->world_size() <= 1) return;
  MANTISSA_CHECK(opts.size() == 1 && opts[0] != nullptr, "Trainer",
                 "strategy 'fsdp' shards the parameters of one optimizer; {} configures {}: use "
                 "strategy 'zero2'",
                 module.name(), opts.size());
  const DType param_dtype = options_.ddp.fsdp_param_dtype;
  MANTISSA_CHECK(
      param_dtype == kFloat32 || (param_dtype == kBFloat16 && plugin.precision() == "bf16-mixed") ||
          (param_dtype == kFloat16 && plugin.precision() == "16-mixed"),
      "Trainer",
      "fsdp gathers the parameters in {} only under the precision that computes in "
      "it ({}); this run's precision is '{}': gather in float32",
      param_dtype.name(), param_dtype == kFloat16 ? "16-mixed" : "bf16-mixed", plugin.precision());
  unshard_module(module);  // (Trainer::fit did already)
  detail::OptimizerShard& shard = shard_for(*opts[0]);
  shard.take_state_from_whole();  // a checkpoint restored since the shard was made
  // An earlier fit's teardown released the slices (the whole parameters held the values).
  for (size_t i = 0; i < shard.parameters().size(); ++i) shard.slice(i).storage()->restore();
  shard.set_slices_hold_values(false);
  shard.sync_from_whole();  // the parameters' values now (restored, or set up)
  shard.set_slices_hold_values(true);
  fsdp_ = std::make_unique<detail::FsdpUnits>(module, shard, options_.ddp.reduce_dtype,
                                              options_.ddp.fsdp_prefetch, param_dtype);
}

void DDPStrategy::gather_full_parameters() {
  if (fsdp_) fsdp_->gather_all();
}

void DDPStrategy::release_full_parameters() {
  if (fsdp_) fsdp_->release_all();
}

// The module stays sharded after the fit: whatever runs next either goes through the units'
// wrappers (an evaluation: one unit whole at a time) or asks for the whole module
// (unshard_module). Gathering the whole module here would hold the whole weights next to the
// rank's part of the optimizer state: at 4 ranks more than any training step holds.
void DDPStrategy::teardown_module(TrainModule& /*module*/) {}

void DDPStrategy::unshard_module(TrainModule& /*module*/) {
  if (!fsdp_) return;
  fsdp_->unwrap();
  fsdp_.reset();
}

}  // namespace mantissa::train
