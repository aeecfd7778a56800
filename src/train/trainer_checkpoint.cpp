// The Trainer's side of checkpoints: the file "best" and "last" name for validate/test/predict,
// and save_checkpoint (collected on every rank, written by rank 0, or by every rank when the
// optimizer state is sharded; docs/checkpoints.md, docs/distributed.md).
#include "mantissa/train/trainer.h"

#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "train/checkpoint/sharded_checkpoint.h"

namespace mantissa::train {

std::string Trainer::eval_checkpoint_path(const std::string& ckpt_path) const {
  if (ckpt_path != "best" && ckpt_path != "last") return ckpt_path;
  // "best" and "last" name the ModelCheckpoint's files, as Lightning's trainer.test(ckpt_path=)
  // reads them. (A file of that name is then reached as ./best.)
  const ModelCheckpoint* mc = nullptr;
  for (const auto& cb : callbacks_) {
    if (const auto* c = dynamic_cast<const ModelCheckpoint*>(cb.get())) {
      MANTISSA_CHECK(mc == nullptr, "Trainer",
                     "ckpt_path=\"{}\" is ambiguous with several ModelCheckpoint callbacks; give "
                     "the file's path",
                     ckpt_path);
      mc = c;
    }
  }
  MANTISSA_CHECK(mc != nullptr, "Trainer",
                 "ckpt_path=\"{}\" names a checkpoint of the ModelCheckpoint callback, but this "
                 "Trainer has none; give the file's path",
                 ckpt_path);
  const std::string& path = ckpt_path == "best" ? mc->best_model_path() : mc->last_model_path();
  MANTISSA_CHECK(!path.empty(), "Trainer",
                 "ckpt_path=\"{}\": the ModelCheckpoint has not saved {} checkpoint yet (fit "
                 "first{}); give the file's path",
                 ckpt_path, ckpt_path == "best" ? "a" : "a last",
                 ckpt_path == "last" ? ", with save_last" : "");
  return path;
}

void Trainer::save_checkpoint(const std::string& path) {
  MANTISSA_CHECK(module_ != nullptr && config_.optimizer != nullptr, "Trainer.save_checkpoint",
                 "nothing to save before fit() has set up a module and its optimizer ({})", path);
  module_->on_before_save_checkpoint();  // on every rank: it may gather over the ranks
  // zero1 / zero2 with sharded checkpoints: every rank writes its part of the optimizer state.
  const std::vector<OptimizerStateShard> shards = strategy_->optimizer_state_shards(optimizers());
  // On every rank too: otherwise zero1 gathers the optimizer state's shards to rank 0.
  const std::vector<optim::OptimizerState> optimizer_states =
      shards.empty() ? strategy_->complete_optimizer_states(optimizers())
                     : std::vector<optim::OptimizerState>{};
  if (strategy_->is_global_zero() && accumulated_batches() > 0) {
    warn_once(fmt::format(
        "a checkpoint was written inside a gradient-accumulation window (at a batch that is not "
        "a multiple of accumulate_grad_batches={}, e.g. by a val_check_interval that is not): "
        "the window's accumulated gradients are not saved, so resuming from it is refused. "
        "Checkpoints written at optimizer steps resume exactly",
        options_.accumulate_grad_batches));
  }
  // fsdp: the weights are read whole (on every rank: a collective), and released after.
  strategy_->gather_full_parameters();
  struct Release {
    Strategy& s;
    ~Release() { s.release_full_parameters(); }
  } release{*strategy_};
  if (!shards.empty()) {
    save_sharded_checkpoint(*this, path, shards);
    return;
  }
  if (!strategy_->is_global_zero()) return;  // rank 0 writes for every rank
  save_checkpoint_file(path, collect_checkpoint(*this, optimizer_states));
}

}  // namespace mantissa::train
