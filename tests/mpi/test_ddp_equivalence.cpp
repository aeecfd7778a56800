// Data-parallel training under mpirun (CTest mpi.*, 2 ranks): N ranks with per-rank batch B
// train the losses and weights of one process with batch N*B, in every precision the issue
// names; accumulation with no_sync equals the unaccumulated run; a checkpoint from 2 ranks
// resumes on 1. Each rank also computes the single-process reference itself
// (strategy "single_device"), so the comparison needs no files.
//
// Built as its own program (mantissa_mpi_tests), not part of mantissa_tests: it must run
// under mpirun. Every rank runs every test and the same collectives in the same order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "mantissa/dist/communicator.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/trainer.h"
#include "train/tiny_module.h"

using namespace mantissa;
using train::testing::TinyModule;
using train::testing::TinyOptions;

namespace {

struct RunResult {
  std::vector<double> losses;
  std::vector<float> weights;
  std::vector<float> buffers;  // floating buffers: FP8 scales and amax histories
  int64_t skipped = 0;
  double scale = 0;
  int64_t reductions = 0;
};

struct RunSpec {
  std::string strategy = "ddp";
  std::string precision = "32-true";
  int64_t batch = 4;
  int64_t accumulate = 1;
  int64_t max_steps = 6;
  DType reduce_dtype = kFloat32;
  std::function<double(int64_t)> loss_multiplier;
  std::string resume_from;
  std::string save_to;  // written when global step save_at_step ends (rank 0 writes)
  int64_t save_at_step = 0;
  int64_t overfit_batches = 0;  // > 0: TrainerOptions::overfit_batches, that many batches
  std::shared_ptr<data::Dataset> dataset;  // null: tiny_dataset(64)
  int64_t max_epochs = 0;                  // > 0: TrainerOptions::max_epochs
  bool shuffle = true;
};

// Saves a checkpoint in the middle of an epoch, after a given optimizer step.
class SaveAtStep : public train::Callback {
 public:
  SaveAtStep(std::string path, int64_t step) : path_(std::move(path)), step_(step) {}
  void on_train_batch_end(train::Trainer& t, train::TrainModule&, const Tensor&,
                          const data::Example&, int64_t) override {
    if (t.global_step() == step_) t.save_checkpoint(path_);
  }

 private:
  std::string path_;
  int64_t step_;
};

RunResult train_tiny(const RunSpec& s) {
  train::TrainerOptions o;
  o.precision = s.precision;
  o.max_steps = s.max_steps;
  o.seed = 11;
  o.strategy = s.strategy;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  o.accumulate_grad_batches = s.accumulate;
  o.ddp.bucket_cap_bytes = 64;  // several buckets even for this tiny net
  o.ddp.reduce_dtype = s.reduce_dtype;
  if (s.max_epochs > 0) o.max_epochs = s.max_epochs;
  if (s.overfit_batches > 0) o.overfit_batches = train::BatchLimit::batches(s.overfit_batches);
  if (!s.save_to.empty())
    o.callbacks.push_back(std::make_shared<SaveAtStep>(s.save_to, s.save_at_step));
  train::Trainer t(o);
  TinyOptions to;
  to.lr = 1e-2;
  to.adamw = true;
  to.loss_multiplier = s.loss_multiplier;
  TinyModule m(to);
  data::DataLoader loader(s.dataset ? s.dataset : train::testing::tiny_dataset(64), s.batch,
                          s.shuffle, 5);
  t.fit(m, loader, nullptr, s.resume_from);
  RunResult r;
  r.losses = t.step_losses();
  for (const auto& [name, p] : m.named_parameters()) {
    const auto v = p.to(kFloat32).to_vector<float>();
    r.weights.insert(r.weights.end(), v.begin(), v.end());
  }
  for (const auto& [name, b] : m.named_buffers()) {
    if (!b.is_floating_point()) continue;
    const auto v = b.to(kFloat32).to_vector<float>();
    r.buffers.insert(r.buffers.end(), v.begin(), v.end());
  }
  if (auto* scaler = t.precision_plugin().scaler()) {
    r.skipped = scaler->skipped_steps();
    r.scale = scaler->get_scale();
  }
  if (t.strategy().reducer()) r.reductions = t.strategy().reducer()->stats().reductions;
  return r;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Every rank holds exactly rank 0's weights.
void expect_same_on_every_rank(const std::vector<float>& w) {
  auto comm = dist::world();
  std::vector<float> zero = w;
  comm->broadcast(zero.data(), static_cast<int64_t>(zero.size() * sizeof(float)), 0);
  EXPECT_EQ(zero, w) << "rank " << comm->rank() << " holds other weights than rank 0";
}

void expect_equivalent(const RunResult& ddp, const RunResult& ref, double loss_tol,
                       double weight_tol, const std::vector<int64_t>& skip_steps = {}) {
  ASSERT_EQ(ddp.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    if (std::find(skip_steps.begin(), skip_steps.end(), static_cast<int64_t>(i)) !=
        skip_steps.end())
      continue;
    EXPECT_NEAR(ddp.losses[i], ref.losses[i], loss_tol * std::max(1.0, std::abs(ref.losses[i])))
        << "step " << i;
  }
  const double d = max_abs_diff(ddp.weights, ref.weights);
  EXPECT_LE(d, weight_tol);
  std::printf("[rank %d] max |w_ddp - w_single| = %.3g (bound %.3g)\n", dist::world()->rank(), d,
              weight_tol);
  expect_same_on_every_rank(ddp.weights);
}

int world_size() { return dist::world()->world_size(); }

}  // namespace

TEST(DdpEquivalence, RunsUnderTwoRanks) { ASSERT_EQ(world_size(), 2) << "run under mpirun -np 2"; }

TEST(DdpEquivalence, Fp32MatchesOneProcessWithTheGlobalBatch) {
  const RunResult ref = train_tiny({.strategy = "single_device", .batch = 4 * world_size()});
  const RunResult ddp = train_tiny({.strategy = "ddp", .batch = 4});
  EXPECT_EQ(ddp.reductions, 6);
  expect_equivalent(ddp, ref, 1e-6, 1e-6);
}

TEST(DdpEquivalence, Bf16MixedMatchesOneProcessWithTheGlobalBatch) {
  const RunResult ref = train_tiny(
      {.strategy = "single_device", .precision = "bf16-mixed", .batch = 4 * world_size()});
  const RunResult ddp = train_tiny({.strategy = "ddp", .precision = "bf16-mixed", .batch = 4});
  expect_equivalent(ddp, ref, 1e-2, 2e-3);
}

TEST(DdpEquivalence, Fp16MixedWithAnOverflowOnOneRankSkipsOnEveryRank) {
  const int rank = dist::world()->rank();
  // Step 2 overflows: in the reference for the whole batch, under ddp on rank 1 alone. Every
  // rank must skip that step and back off the scale, as the reference does.
  const RunResult ref =
      train_tiny({.strategy = "single_device",
                  .precision = "16-mixed",
                  .batch = 4 * world_size(),
                  .loss_multiplier = [](int64_t s) { return s == 2 ? 1e30 : 1.0; }});
  const RunResult ddp = train_tiny(
      {.strategy = "ddp",
       .precision = "16-mixed",
       .batch = 4,
       .loss_multiplier = [rank](int64_t s) { return s == 2 && rank == 1 ? 1e30 : 1.0; }});
  EXPECT_EQ(ref.skipped, 1);
  EXPECT_EQ(ddp.skipped, 1) << "rank " << rank;
  EXPECT_EQ(ddp.scale, ref.scale);
  // The overflowing step's loss differs by construction (one rank's loss was multiplied).
  expect_equivalent(ddp, ref, 1e-3, 2e-4, {2});
}

TEST(DdpEquivalence, Fp8AmaxHistoriesAreReducedAcrossRanks) {
  // transformer-engine: every rank's scales come from the amaxes of all ranks, so they are the
  // single process's (its batch is the union of the ranks' batches) and the same everywhere.
  const RunResult ref = train_tiny(
      {.strategy = "single_device", .precision = "transformer-engine", .batch = 4 * world_size()});
  const RunResult ddp =
      train_tiny({.strategy = "ddp", .precision = "transformer-engine", .batch = 4});
  // (Not equal to the single process's: each rank's gradients are of its own mean loss, N times
  // the global one's, so grad_output amaxes differ by N, as with TransformerEngine under DDP.)
  ASSERT_FALSE(ddp.buffers.empty());
  expect_same_on_every_rank(ddp.buffers);
  // The weights are bf16 here: 8e-3 is two units in the last place near 1.
  expect_equivalent(ddp, ref, 1e-2, 8e-3);
}

TEST(DdpEquivalence, Bf16CompressedGradientsStayClose) {
  const RunResult ref = train_tiny({.strategy = "single_device", .batch = 4 * world_size()});
  const RunResult ddp = train_tiny({.strategy = "ddp", .batch = 4, .reduce_dtype = kBFloat16});
  expect_equivalent(ddp, ref, 1e-2, 2e-3);
}

TEST(DdpEquivalence, NoSyncAccumulationEqualsTheUnaccumulatedRun) {
  // 2 ranks x batch 4 x 2 accumulated == 1 process x batch 16; one reduction per step.
  const RunResult ref = train_tiny({.strategy = "single_device", .batch = 8 * world_size()});
  const RunResult ddp = train_tiny({.strategy = "ddp", .batch = 4, .accumulate = 2});
  EXPECT_EQ(ddp.reductions, 6) << "gradients must be reduced once per optimizer step";
  expect_equivalent(ddp, ref, 1e-6, 1e-6);
}

TEST(DdpEquivalence, OverfitBatchesMatchOneProcessWithTheGlobalBatch) {
  // overfit_batches 2: the first 2 global batches (examples 0..15 at 2 ranks x 4), unshuffled,
  // every epoch. Every rank read the dataset's first 2 batches of 4 (examples 0..7, the same on
  // both ranks), so the job trained on half the examples, each twice per global batch.
  const RunResult ref =
      train_tiny({.strategy = "single_device", .batch = 4 * world_size(), .overfit_batches = 2});
  const RunResult ddp = train_tiny({.strategy = "ddp", .batch = 4, .overfit_batches = 2});
  ASSERT_EQ(ref.losses.size(), 6u);  // 3 epochs of 2 batches
  expect_equivalent(ddp, ref, 1e-6, 1e-6);
}

TEST(DdpEquivalence, AnUnevenDatasetIsReadAsOneProcessReadsItPaddedWithItsFirstExamples) {
  // 61 examples over N = 2 ranks (batch 4 each, unshuffled): as torch's DistributedSampler,
  // each rank reads ceil(61 / 2) = 31, rank 1's last one example 0 again (the padding), so
  // every example is read and one twice. The job is one process with batch 8 over those 62:
  // the first 7 global batches are one process's over the 61, the last holds 6 examples where
  // one process over the 61 has 5 (docs/distributed.md, "The sampler").
  const auto uneven = train::testing::tiny_dataset(61);
  const auto padded = std::make_shared<data::TensorDataset>(
      cat({uneven->inputs(), uneven->inputs().narrow(0, 0, 1)}, 0),
      cat({uneven->targets(), uneven->targets().narrow(0, 0, 1)}, 0));
  const RunResult ddp = train_tiny({.strategy = "ddp",
                                    .batch = 4,
                                    .max_steps = 100,
                                    .dataset = uneven,
                                    .max_epochs = 1,
                                    .shuffle = false});
  const RunResult ref = train_tiny({.strategy = "single_device",
                                    .batch = 4 * world_size(),
                                    .max_steps = 100,
                                    .dataset = padded,
                                    .max_epochs = 1,
                                    .shuffle = false});
  const RunResult one = train_tiny({.strategy = "single_device",
                                    .batch = 4 * world_size(),
                                    .max_steps = 100,
                                    .dataset = uneven,
                                    .max_epochs = 1,
                                    .shuffle = false});
  ASSERT_EQ(ddp.losses.size(), 8u);  // one epoch: ceil(31 / 4) steps
  ASSERT_EQ(one.losses.size(), 8u);
  expect_equivalent(ddp, ref, 1e-6, 1e-6);
  for (size_t i = 0; i + 1 < one.losses.size(); ++i)
    EXPECT_NEAR(ddp.losses[i], one.losses[i], 1e-6 * std::max(1.0, std::abs(one.losses[i])))
        << "step " << i;
  // The last global batch: 6 examples (example 0 twice) against one process's 5.
  EXPECT_GT(std::abs(ddp.losses[7] - one.losses[7]), 1e-4);
}

TEST(DdpEquivalence, CheckpointFromTwoRanksResumesOnOne) {
  auto comm = dist::world();
  const std::string path = "mpi_resume_2to1.safetensors";
  // Half the run on 2 ranks, saved mid-epoch after step 3; rank 0 writes for both.
  train_tiny({.strategy = "ddp", .batch = 4, .save_to = path, .save_at_step = 3});
  comm->barrier();
  ASSERT_TRUE(std::filesystem::exists(path));
  const RunResult resumed = train_tiny({.strategy = "single_device",
                                        .batch = 4 * world_size(),
                                        .max_steps = 6,
                                        .resume_from = path});
  const RunResult ref = train_tiny({.strategy = "single_device", .batch = 4 * world_size()});
  expect_equivalent(resumed, ref, 1e-6, 1e-6);
  comm->barrier();
  if (comm->is_global_zero()) std::filesystem::remove(path);
}

namespace {
// Batch norm over the 4 features (as [N, 4, 1, 1]) before a linear classifier.
class BatchNormModule : public train::TrainModule {
 public:
  void configure_model() override {
    register_module("bn", std::make_shared<nn::BatchNorm2d>(4));
    register_module("fc", std::make_shared<nn::Linear>(4, 3));
  }
  Tensor training_step(const data::Example& b, int64_t) override {
    const int64_t n = b.input.size(0);
    Tensor x = child("bn")->forward(b.input.reshape({n, 4, 1, 1})).reshape({n, 4});
    return cross_entropy(child("fc")->forward(x), b.target);
  }
  train::OptimizerConfig configure_optimizers() override {
    return {std::make_shared<optim::SGD>(parameters(), 0.1)};
  }
};

RunResult train_batchnorm(const std::string& strategy, int64_t batch, bool sync) {
  train::TrainerOptions o;
  o.max_steps = 4;
  o.seed = 3;
  o.strategy = strategy;
  o.sync_batchnorm = sync;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  train::Trainer t(o);
  BatchNormModule m;
  data::DataLoader loader(train::testing::tiny_dataset(64), batch, true, 2);
  t.fit(m, loader);
  RunResult r;
  r.losses = t.step_losses();
  for (const auto& [name, p] : m.named_parameters()) {
    const auto v = p.to_vector<float>();
    r.weights.insert(r.weights.end(), v.begin(), v.end());
  }
  for (const auto& [name, b] : m.named_buffers()) {
    if (!b.is_floating_point()) continue;
    const auto v = b.to_vector<float>();
    r.buffers.insert(r.buffers.end(), v.begin(), v.end());
  }
  return r;
}
}  // namespace

TEST(DdpEquivalence, SyncBatchNormMatchesOneProcessPerRankBatchNormDoesNot) {
  const RunResult ref = train_batchnorm("single_device", 4 * world_size(), false);
  const RunResult synced = train_batchnorm("ddp", 4, true);
  expect_equivalent(synced, ref, 1e-5, 1e-5);
  expect_same_on_every_rank(synced.buffers);
  EXPECT_LE(max_abs_diff(synced.buffers, ref.buffers), 1e-5) << "running statistics";
  // Per-rank statistics (the default) normalise each rank's half batch on its own.
  const RunResult local = train_batchnorm("ddp", 4, false);
  EXPECT_GT(max_abs_diff(local.weights, ref.weights), 1e-4);
}

namespace {
// Validation and test under ddp: examples carry their index as the first feature, so a module
// can tell which it evaluated. The mean squared error is summed over examples and added up
// over the ranks (as the CLI's models do); val_rank is logged per batch and left to the
// Trainer's reduction of what was logged.
class IdModule : public train::TrainModule {
 public:
  void configure_model() override {
    if (!fc_) fc_ = register_module("fc", std::make_shared<nn::Linear>(2, 1));
  }
  Tensor training_step(const data::Example& b, int64_t) override {
    return mean([&] {
      const Tensor d = sub(fc_->forward(b.input).reshape({-1}), b.target);
      return mul(d, d);
    }());
  }
  void evaluate(const data::Example& b) {
    const Tensor err = [&] {
      const Tensor d = sub(fc_->forward(b.input).reshape({-1}), b.target);
      return mul(d, d);
    }();
    err_sum_ += sum(err).item();
    count_ += b.target.numel();
    const auto x = b.input.to_vector<float>();
    for (size_t i = 0; i < x.size(); i += 2) ids.push_back(static_cast<int64_t>(x[i]));
    log(prefix_ + "_rank", static_cast<double>(dist::world()->rank()));
  }
  void validation_step(const data::Example& b, int64_t) override { evaluate(b); }
  void test_step(const data::Example& b, int64_t) override { evaluate(b); }
  void on_validation_epoch_start() override { start("val"); }
  void on_test_epoch_start() override { start("test"); }
  void on_validation_epoch_end() override { finish(); }
  void on_test_epoch_end() override { finish(); }
  train::OptimizerConfig configure_optimizers() override {
    return {std::make_shared<optim::SGD>(parameters(), 0.1)};
  }
  std::vector<int64_t> ids;

 protected:
  Tensor forward_fc(const Tensor& x) { return fc_->forward(x).reshape({-1}); }

 private:
  void start(const std::string& prefix) {
    prefix_ = prefix;
    err_sum_ = 0;
    count_ = 0;
  }
  void finish() {
    std::vector<double> sums = {err_sum_, static_cast<double>(count_)};
    trainer().strategy().sum_over_ranks(sums);
    if (sums[1] > 0) log(prefix_ + "_mse", sums[0] / sums[1]);
  }
  std::shared_ptr<nn::Linear> fc_;
  std::string prefix_;
  double err_sum_ = 0;
  int64_t count_ = 0;
};

std::shared_ptr<data::TensorDataset> id_dataset(int64_t n) {
  Generator gen(3);
  Tensor x = randn({n, 2}, kFloat32, &gen);
  for (int64_t i = 0; i < n; ++i) x.data<float>()[2 * i] = static_cast<float>(i);
  return std::make_shared<data::TensorDataset>(x, randn({n}, kFloat32, &gen));
}

struct EvalResult {
  std::vector<int64_t> ids;
  std::map<std::string, double> metrics;
};

EvalResult evaluate_ids(const std::string& strategy, int64_t n, int64_t batch, bool test,
                        int64_t limit = -1) {
  train::TrainerOptions o;
  o.strategy = strategy;
  o.seed = 11;  // the same initial weights on every rank and in the reference
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  if (limit >= 0)
    (test ? o.limit_test_batches : o.limit_val_batches) = train::BatchLimit::batches(limit);
  train::Trainer t(o);
  IdModule m;
  data::DataLoader loader(id_dataset(n), batch);
  EvalResult r;
  r.metrics = test ? t.test(m, loader) : t.validate(m, loader);
  r.ids = m.ids;
  return r;
}

// Every rank holds rank 0's value.
void expect_same_value_on_every_rank(double v, const std::string& what) {
  double zero = v;
  dist::world()->broadcast(&zero, sizeof zero, 0);
  EXPECT_EQ(zero, v) << what << " on rank " << dist::world()->rank() << " is not rank 0's";
}
}  // namespace

// Validation (and test) read each example on exactly one rank, with no padding repeats, and
// report the whole set's metrics, equal to one process's on the same weights: rank r reads
// examples r, r + 2, ... (11 examples: 6 and 5). Every rank validated all 11 before.
TEST(DdpValidation, EachExampleOnOneRankAndTheMetricsAreOneProcesss) {
  const int rank = dist::world()->rank();
  for (const bool test : {false, true}) {
    const std::string name = test ? "test" : "val";
    const EvalResult ddp = evaluate_ids("ddp", 11, 2, test);
    const EvalResult one = evaluate_ids("single_device", 11, 4, test);
    std::vector<int64_t> mine;
    for (int64_t i = rank; i < 11; i += 2) mine.push_back(i);
    EXPECT_EQ(ddp.ids, mine) << name << " on rank " << rank;
    ASSERT_EQ(one.ids.size(), 11u);
    ASSERT_TRUE(ddp.metrics.count(name + "_mse"));
    EXPECT_NEAR(ddp.metrics.at(name + "_mse"), one.metrics.at(name + "_mse"),
                1e-6 * one.metrics.at(name + "_mse"))
        << name;
    // Logged per batch, reduced by the Trainer: 3 batches on each rank, the mean of 0 and 1.
    EXPECT_EQ(ddp.metrics.at(name + "_rank"), 0.5) << name;
    for (const auto& [k, v] : ddp.metrics) expect_same_value_on_every_rank(v, k);
    std::printf("[rank %d] %s_mse 2 ranks %.9g, one process %.9g\n", rank, name.c_str(),
                ddp.metrics.at(name + "_mse"), one.metrics.at(name + "_mse"));
  }
}

// limit_val_batches counts the global batches: 2 of them are examples 0..7, one process's with
// batch 4; a shard emptier than the others (1 example, 2 ranks) runs nothing and still joins
// the reductions (it hung or lacked the metric's name).
TEST(DdpValidation, LimitsCountGlobalBatchesAndAnEmptyShardTakesPart) {
  const int rank = dist::world()->rank();
  const EvalResult ddp = evaluate_ids("ddp", 11, 2, false, 2);
  const EvalResult one = evaluate_ids("single_device", 11, 4, false, 2);
  const std::vector<int64_t> first_two =
      rank == 0 ? std::vector<int64_t>{0, 2, 4, 6} : std::vector<int64_t>{1, 3, 5, 7};
  EXPECT_EQ(ddp.ids, first_two);
  EXPECT_NEAR(ddp.metrics.at("val_mse"), one.metrics.at("val_mse"),
              1e-6 * one.metrics.at("val_mse"));
  const EvalResult tiny = evaluate_ids("ddp", 1, 2, false);
  const EvalResult tiny_one = evaluate_ids("single_device", 1, 4, false);
  const std::vector<int64_t> tiny_ids =
      rank == 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{};
  EXPECT_EQ(tiny.ids, tiny_ids);
  EXPECT_NEAR(tiny.metrics.at("val_mse"), tiny_one.metrics.at("val_mse"),
              1e-6 * tiny_one.metrics.at("val_mse"));
  EXPECT_EQ(tiny.metrics.at("val_rank"), 0.0);  // rank 0's one batch
}

namespace {
// predict_step returns the batch's outputs plus a per-rank buffer (rank 0 holds 0, rank 1 holds
// 100 before predict), an int64 tensor of the examples' ids, or nothing for batch 2: the
// gathered list must be one process's, made with rank 0's buffer, whatever rank predicted it.
class PredictModule : public IdModule {
 public:
  void configure_model() override {
    IdModule::configure_model();
    if (!offset_.defined()) offset_ = register_buffer("offset", zeros({1}));
  }
  void set_offset(float v) { offset_.data<float>()[0] = v; }
  Tensor predict_step(const data::Example& b, int64_t batch_idx) override {
    predicted.push_back(batch_idx);
    if (batch_idx == 2) return Tensor();
    if (batch_idx == 3) return b.input.narrow(1, 0, 1).reshape({-1}).to(kInt64);
    return add(forward_fc(b.input), offset_);
  }
  std::vector<int64_t> predicted;

 private:
  Tensor offset_;
};

std::vector<Tensor> predict_with(const std::string& strategy, int64_t n, int64_t batch,
                                 std::vector<int64_t>* predicted) {
  train::TrainerOptions o;
  o.strategy = strategy;
  o.seed = 11;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  train::Trainer t(o);
  PredictModule m;
  m.configure_model();
  if (strategy == "ddp") m.set_offset(100.0f * static_cast<float>(dist::world()->rank()));
  data::DataLoader loader(id_dataset(n), batch);
  std::vector<Tensor> out = t.predict(m, loader);
  *predicted = m.predicted;
  return out;
}
}  // namespace

// predict under ddp shares the batches (rank r predicts r, r + 2, ...) and every rank returns
// the whole list in batch order, as one process does; every rank predicted every batch before,
// and with its own buffers.
TEST(DdpPredict, RanksShareTheBatchesAndEachReturnsOneProcesssList) {
  const int rank = dist::world()->rank();
  std::vector<int64_t> ddp_batches, one_batches;
  const std::vector<Tensor> ddp = predict_with("ddp", 11, 2, &ddp_batches);
  const std::vector<Tensor> one = predict_with("single_device", 11, 2, &one_batches);
  const std::vector<int64_t> mine =
      rank == 0 ? std::vector<int64_t>{0, 2, 4} : std::vector<int64_t>{1, 3, 5};
  EXPECT_EQ(ddp_batches, mine) << "rank " << rank;
  ASSERT_EQ(one.size(), 6u);
  ASSERT_EQ(ddp.size(), one.size()) << "rank " << rank;
  for (size_t b = 0; b < one.size(); ++b) {
    ASSERT_EQ(ddp[b].defined(), one[b].defined()) << "batch " << b;
    if (!one[b].defined()) continue;
    EXPECT_EQ(ddp[b].dtype(), one[b].dtype()) << "batch " << b;
    EXPECT_EQ(ddp[b].shape(), one[b].shape()) << "batch " << b;
    const Tensor d = ddp[b].to(kFloat64), o = one[b].to(kFloat64);
    EXPECT_EQ(d.to_vector<double>(), o.to_vector<double>()) << "batch " << b << " on rank " << rank;
  }
  EXPECT_FALSE(ddp[2].defined());
  EXPECT_EQ(ddp[3].to_vector<int64_t>(), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(ddp[5].numel(), 1);  // the last batch holds example 10 alone
}

// A loss that is NaN on rank 1 alone (its shard) stops every rank in the same step with the
// same TrainingDiverged, thrown on every rank together, so the job ends as one process does
// (no MPI_Abort from rank 1 with status 2 while rank 0 waits in backward).
TEST(DdpDivergence, ANaNLossOnOneRankStopsEveryRankTogether) {
  const int rank = dist::world()->rank();
  RunSpec s;
  s.loss_multiplier = [rank](int64_t step) { return rank == 1 && step == 2 ? NAN : 1.0; };
  std::string message;
  try {
    train_tiny(s);
    ADD_FAILURE() << "training went on past a NaN loss on rank 1";
  } catch (const train::TrainingDiverged& e) {
    EXPECT_TRUE(e.every_rank());
    message = e.what();
  }
  EXPECT_NE(message.find("[Trainer] the loss became NaN in optimizer step 3 (epoch 1, batch 3 of "
                         "the epoch) in 32-true"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(found on rank 1 of 2)"), std::string::npos) << message;
  int64_t length = static_cast<int64_t>(message.size());
  dist::world()->broadcast(&length, sizeof length, 0);
  EXPECT_EQ(length, static_cast<int64_t>(message.size())) << "rank " << rank << ": " << message;
  // The job goes on: the ranks still meet in collectives (the next tests run too).
  expect_same_value_on_every_rank(1.0, "a collective after the divergence");
}

// Run alone with MANTISSA_MPI_FAILURE_TEST=1 (CTest mpi.rank_failure_aborts_job): rank 1
// throws in the middle of training; the job must end with a message naming the rank.
TEST(DdpFailure, RankThatThrowsAbortsTheJob) {
  if (std::getenv("MANTISSA_MPI_FAILURE_TEST") == nullptr) GTEST_SKIP() << "run by its own test";
  const int rank = dist::world()->rank();
  RunSpec s;
  s.loss_multiplier = [rank](int64_t step) -> double {
    if (rank == 1 && step == 2) fail("test", "boom on rank {}", rank);
    return 1.0;
  };
  train_tiny(s);
  ADD_FAILURE() << "training went on after a rank failed";
}

namespace {
// A net whose hidden width depends on the rank: setup must refuse it.
class RankDependentModule : public train::TrainModule {
 public:
  void configure_model() override {
    const int64_t hidden = dist::world()->rank() == 0 ? 8 : 6;
    fc_ = register_module("fc", std::make_shared<nn::Linear>(4, hidden));
  }
  Tensor training_step(const data::Example& b, int64_t) override {
    return sum(fc_->forward(b.input));
  }
  train::OptimizerConfig configure_optimizers() override {
    return {std::make_shared<optim::SGD>(parameters(), 0.1)};
  }
  std::shared_ptr<nn::Linear> fc_;
};
}  // namespace

TEST(DdpFailure, MismatchedShapesAreRefusedAtSetup) {
  if (std::getenv("MANTISSA_MPI_FAILURE_TEST") == nullptr) GTEST_SKIP() << "run by its own test";
  train::TrainerOptions o;
  o.strategy = "ddp";
  o.max_steps = 1;
  o.enable_checkpointing = false;
  train::Trainer t(o);
  RankDependentModule m;
  data::DataLoader loader(train::testing::tiny_dataset(16), 4);
  t.fit(m, loader);
  ADD_FAILURE() << "a model with other shapes on rank 1 was accepted";
}
