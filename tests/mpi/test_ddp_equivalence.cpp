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
  bool bf16_compress = false;
  std::function<double(int64_t)> loss_multiplier;
  std::string resume_from;
  std::string save_to;  // written when global step save_at_step ends (rank 0 writes)
  int64_t save_at_step = 0;
  int64_t overfit_batches = 0;  // > 0: TrainerOptions::overfit_batches, that many batches
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
  o.ddp.bf16_compress = s.bf16_compress;
  if (s.overfit_batches > 0) o.overfit_batches = train::BatchLimit::batches(s.overfit_batches);
  if (!s.save_to.empty())
    o.callbacks.push_back(std::make_shared<SaveAtStep>(s.save_to, s.save_at_step));
  train::Trainer t(o);
  TinyOptions to;
  to.lr = 1e-2;
  to.adamw = true;
  to.loss_multiplier = s.loss_multiplier;
  TinyModule m(to);
  data::DataLoader loader(train::testing::tiny_dataset(64), s.batch, /*shuffle=*/true, 5);
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
  const RunResult ddp = train_tiny({.strategy = "ddp", .batch = 4, .bf16_compress = true});
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
