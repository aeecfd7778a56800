// validate, test and predict: the evaluation loop over a loader (sharded under ddp, limited by
// limit_val_batches / limit_test_batches), its metrics summed over the ranks, and predict's
// outputs gathered from every rank.
#include "mantissa/train/trainer.h"

#include <algorithm>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "train/trainer_internal.h"

namespace mantissa::train {

using namespace detail;  // the shared helpers of trainer_internal.h

namespace {
// An evaluation's limit resolved against the longest shard's batches (the same on every rank;
// a collective under ddp), its error naming limit_val_batches or limit_test_batches.
int64_t resolve_eval_limit(Strategy& strategy, const BatchLimit& limit,
                           const data::DataLoader& shard, const std::string& stage) {
  const bool validating = stage == "validate";
  return limit.resolve(strategy.max_over_ranks(shard.size()),
                       validating ? "limit_val_batches" : "limit_test_batches",
                       validating ? "val" : "test");
}
}  // namespace

std::map<std::string, double> Trainer::run_eval(const data::DataLoader& loader,
                                                const std::string& stage, const BatchLimit& limit) {
  const std::string previous_stage = stage_;
  const bool was_training = module_->is_training();
  eval_sums_.clear();
  stage_ = stage;
  NoGradGuard no_grad;
  module_->eval();
  const bool validating = stage == "validate";
  if (validating) {
    MANTISSA_HOOK(on_validation_start);
    MANTISSA_HOOK(on_validation_epoch_start);
  } else {
    MANTISSA_HOOK(on_test_start);
    MANTISSA_HOOK(on_test_epoch_start);
  }
  // Under ddp this rank's part of the set (no example on two ranks), the job's global batches
  // that its shard holds: a shorter shard may run one batch fewer (no collective inside the
  // loop, so the ranks need not run the same number).
  strategy_->before_evaluation();
  const data::DataLoader& shard = strategy_->evaluation_loader(loader);
  const int64_t n = std::min(resolve_eval_limit(*strategy_, limit, shard, stage), shard.size());
  const std::vector<int64_t> order = shard.indices(shard.epoch());
  ProfileScope profile_loop(profiler(), validating ? "run_validation" : "run_test");
  for (int64_t b = 0; b < n; ++b) {
    data::Example raw;
    {
      ProfileScope profile(profiler(), validating ? "get_validation_batch" : "get_test_batch");
      raw = shard.batch(order, b);
    }
    const data::Example batch = plugin_->convert_input(batch_to_device(raw));
    ScopePtr scope = plugin_->forward_context();
    ProfileScope profile(profiler(),
                         validating ? "[TrainModule]validation_step" : "[TrainModule]test_step");
    const auto managed =
        managed_scope(*plugin_, *module_, validating ? "validation_step" : "test_step");
    if (validating) {
      module_->validation_step(batch, b);
    } else {
      module_->test_step(batch, b);
    }
  }
  if (validating) {
    MANTISSA_HOOK(on_validation_epoch_end);
  } else {
    MANTISSA_HOOK(on_test_epoch_end);
  }
  sum_eval_metrics_over_ranks();
  std::map<std::string, double> results;
  for (const auto& [name, s] : eval_sums_) results[name] = s.sum / static_cast<double>(s.count);
  warn_if_loss_not_finite(results, stage);
  flush_epoch_metrics(eval_sums_, logger_step_);
  // Before on_validation_end: a ModelCheckpoint saving there has a validation behind it.
  if (validating && !sanity_checking_) has_validated_ = true;
  if (validating) {
    MANTISSA_HOOK(on_validation_end);
  } else {
    MANTISSA_HOOK(on_test_end);
  }
  stage_ = previous_stage;
  if (was_training) module_->train();
  return results;
}

int64_t Trainer::evaluation_batches(const data::DataLoader& loader, const BatchLimit& limit,
                                    const std::string& stage) {
  return resolve_eval_limit(*strategy_, limit, strategy_->evaluation_loader(loader), stage);
}

void Trainer::sum_eval_metrics_over_ranks() {
  if (strategy_->world_size() <= 1) return;
  // Lightning leaves this to log(sync_dist=True), averaging the ranks' means; unsynced, each
  // rank's EarlyStopping and ModelCheckpoint would judge its own shard, disagree, and stop or
  // save apart. Here what was logged is always the job's: the batches' values summed and
  // counted over every rank (a value a module logged once per rank, already reduced, stays
  // itself). A rank whose shard was empty logged no per-batch value: the names are the union.
  std::vector<std::string> names;
  for (const auto& [name, s] : eval_sums_) names.push_back(name);
  names = strategy_->union_over_ranks(names);
  std::vector<double> values;
  for (const std::string& name : names) {
    const auto it = eval_sums_.find(name);
    const EpochSum s = it == eval_sums_.end() ? EpochSum{} : it->second;
    values.insert(values.end(), {s.sum, static_cast<double>(s.count), s.forked ? 1.0 : 0.0});
  }
  strategy_->sum_over_ranks(values);
  for (size_t i = 0; i < names.size(); ++i) {
    eval_sums_[names[i]] = {values[3 * i], static_cast<int64_t>(values[3 * i + 1]),
                            values[3 * i + 2] > 0};
  }
}

std::map<std::string, double> Trainer::validate(TrainModule& module, const data::DataLoader& loader,
                                                const std::string& ckpt_path) {
  return evaluate(module, loader, ckpt_path, "validate", options_.limit_val_batches);
}

std::map<std::string, double> Trainer::test(TrainModule& module, const data::DataLoader& loader,
                                            const std::string& ckpt_path) {
  return evaluate(module, loader, ckpt_path, "test", options_.limit_test_batches);
}

std::map<std::string, double> Trainer::evaluate(TrainModule& module, const data::DataLoader& loader,
                                                const std::string& ckpt_path,
                                                const std::string& stage, const BatchLimit& limit) {
  ProfilerSession profiling(profiler());
  try {
    evaluation_batches(loader, limit, stage);  // a limit that leaves no batch: before setup
    setup(module, stage);
    if (!ckpt_path.empty())
      load_checkpoint_weights(module, eval_checkpoint_path(ckpt_path), plugin_.get());
    auto results = run_eval(loader, stage, limit);
    teardown(stage);
    for (auto& l : options_.loggers) l->finalize();
    return results;
  } catch (const std::exception& e) {
    notify_exception(e);
    throw;
  }
}

std::vector<Tensor> Trainer::predict(TrainModule& module, const data::DataLoader& loader,
                                     const std::string& ckpt_path) {
  ProfilerSession profiling(profiler());
  try {
    std::vector<Tensor> outputs = predict_impl(module, loader, ckpt_path);
    teardown("predict");
    return outputs;
  } catch (const std::exception& e) {
    notify_exception(e);
    throw;
  }
}

std::vector<Tensor> Trainer::predict_impl(TrainModule& module, const data::DataLoader& loader,
                                          const std::string& ckpt_path) {
  // Before setup, as fit / validate / test check theirs: a fraction leaving no batch is an error.
  const int64_t batches =
      options_.limit_predict_batches.resolve(loader.size(), "limit_predict_batches", "predict");
  setup(module, "predict");
  if (!ckpt_path.empty())
    load_checkpoint_weights(module, eval_checkpoint_path(ckpt_path), plugin_.get());
  const std::string previous_stage = stage_;
  const bool was_training = module_->is_training();
  stage_ = "predict";
  NoGradGuard no_grad;
  module_->eval();
  strategy_->before_evaluation();  // under ddp: every rank predicts with rank 0's buffers
  // Under ddp the ranks share the batches (rank r predicts batches r, r + N, ...) and then
  // exchange their outputs, so each returns the list one process would, in 1/N of the time.
  // A loader the caller sharded already (its own sampler) is predicted whole on each rank.
  const bool shared = strategy_->world_size() > 1 && loader.sampler() == nullptr;
  const int64_t first = shared ? strategy_->rank() : 0,
                stride = shared ? strategy_->world_size() : 1;
  std::vector<Tensor> outputs;
  const std::vector<int64_t> order = loader.indices(loader.epoch());
  ProfileScope profile_loop(profiler(), "run_predict");
  for (int64_t b = first; b < batches; b += stride) {
    data::Example raw;
    {
      ProfileScope profile(profiler(), "get_predict_batch");
      raw = loader.batch(order, b);
    }
    const data::Example batch = plugin_->convert_input(batch_to_device(raw));
    Tensor out;
    {
      ScopePtr scope = plugin_->forward_context();
      ProfileScope profile(profiler(), "[TrainModule]predict_step");
      const auto managed = managed_scope(*plugin_, *module_, "predict_step");
      out = module_->predict_step(batch, b);
    }
    if (out.defined()) {
      out = out.detach();
      if (out.dtype().is_reduced_float()) out = out.to(kFloat32);
    }
    outputs.push_back(out);
  }
  if (shared) outputs = interleave_ranks_predictions(outputs, batches);
  stage_ = previous_stage;
  if (was_training) module_->train();
  return outputs;
}

std::vector<Tensor> Trainer::interleave_ranks_predictions(const std::vector<Tensor>& mine,
                                                          int64_t batches) {
  const std::vector<std::vector<Tensor>> lists = strategy_->gather_over_ranks(mine);
  const int64_t world = strategy_->world_size();
  std::vector<Tensor> all;
  all.reserve(static_cast<size_t>(batches));
  for (int64_t b = 0; b < batches; ++b) {
    const std::vector<Tensor>& from = lists[static_cast<size_t>(b % world)];
    const auto i = static_cast<size_t>(b / world);
    MANTISSA_CHECK(i < from.size(), "Trainer.predict",
                   "rank {} returned {} predictions, batch {} of {} missing", b % world,
                   from.size(), b, batches);
    Tensor t = from[i];
    // Another rank's outputs arrive on the CPU; they go where this rank's own are.
    if (t.defined() && b % world != strategy_->rank() && t.device() != device_) t = t.to(device_);
    all.push_back(std::move(t));
  }
  return all;
}

}  // namespace mantissa::train
