// LanguageModelOptions::token_weighted on the Trainer (TrainModule::loss_items): a step's loss
// is the mean over every trained target of its batches, so accumulating two micro-batches with
// very different numbers of trained targets gives the step loss and the weights of one batch of
// the four sequences; the per-batch mean (token_weighted off) weighs the micro-batches equally,
// and measurably differs. In 64-true, so the bounds see the weighting, not fp32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mantissa/data/dataloader.h"
#include "mantissa/data/token_blocks.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/language_model.h"
#include "mantissa/train/trainer.h"

namespace mantissa::models {
namespace {

constexpr int64_t kSeq = 16;
// Trained targets per sequence (the rest are the prompt's, ignored): the first micro-batch of
// two sequences trains 2 targets, the second 30.
const std::vector<int64_t> kTrained = {1, 1, 16, 14, 2, 1, 15, 16};

// Byte tokens; each sequence's last kTrained[i] targets are trained.
data::Example sequences() {
  const auto n = static_cast<int64_t>(kTrained.size());
  Generator gen(11);
  const Tensor input = randint(0, 256, {n, kSeq}, kInt64, &gen);
  Tensor target = randint(0, 256, {n, kSeq}, kInt64, &gen);
  auto* t = target.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kSeq - kTrained[static_cast<size_t>(i)]; ++j)
      t[i * kSeq + j] = data::kIgnoreIndex;
  return {input, target};
}

GPTConfig tiny_gpt(DType dtype) {
  return {.context = kSeq, .layers = 1, .width = 32, .heads = 2, .dtype = dtype};
}

struct FitResult {
  std::vector<double> step_losses;
  std::vector<std::vector<double>> weights;
};

train::TrainerOptions trainer_options(int64_t steps, int64_t accumulate) {
  train::TrainerOptions o;
  o.precision = "64-true";  // the comparisons below then see the weighting, not the rounding
  o.max_steps = steps;
  o.accumulate_grad_batches = accumulate;
  o.seed = 3;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  return o;
}

FitResult fit(bool token_weighted, int64_t batch_size, int64_t accumulate) {
  train::Trainer trainer(trainer_options(2, accumulate));
  LanguageModel lm(std::make_shared<GPT>(tiny_gpt(trainer.precision_plugin().param_dtype())),
                   {.lr = 3e-3, .warmup_steps = 0, .token_weighted = token_weighted});
  const data::Example all = sequences();
  data::DataLoader loader(std::make_shared<data::TensorDataset>(all.input, all.target), batch_size);
  trainer.fit(lm, loader);
  FitResult r{trainer.step_losses(), {}};
  for (const Tensor& p : lm.parameters()) r.weights.push_back(p.contiguous().to_vector<double>());
  return r;
}

double max_weight_difference(const FitResult& a, const FitResult& b) {
  double d = 0;
  for (size_t i = 0; i < a.weights.size(); ++i)
    for (size_t j = 0; j < a.weights[i].size(); ++j)
      d = std::max(d, std::abs(a.weights[i][j] - b.weights[i][j]));
  return d;
}

TEST(TokenWeightedLoss, AccumulatedMicroBatchesEqualOneBatchOfTheStep) {
  const FitResult whole = fit(/*token_weighted=*/true, 4, 1);
  const FitResult accumulated = fit(/*token_weighted=*/true, 2, 2);
  ASSERT_EQ(whole.step_losses.size(), 2u);
  ASSERT_EQ(accumulated.step_losses.size(), 2u);

  // The first step's loss, from the same initial weights: the mean cross-entropy over the 32
  // trained targets of the first four sequences.
  manual_seed(3);
  GPT gpt(tiny_gpt(kFloat64));
  const data::Example all = sequences();
  const Tensor first4_in = all.input.slice(0, 0, 4), first4_target = all.target.slice(0, 0, 4);
  const double reference = GPT::loss(gpt.forward(first4_in), first4_target).item();
  EXPECT_NEAR(whole.step_losses[0], reference, 1e-12 * reference);

  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(accumulated.step_losses[i], whole.step_losses[i], 1e-12 * whole.step_losses[i]);
  EXPECT_LT(max_weight_difference(whole, accumulated), 1e-12);  // 5e-15 measured
}

TEST(TokenWeightedLoss, PerBatchMeansWeighTheMicroBatchesEqually) {
  const FitResult whole = fit(/*token_weighted=*/true, 4, 1);
  const FitResult per_batch = fit(/*token_weighted=*/false, 2, 2);
  // The first step: the mean of the two micro-batches' means (2 and 30 trained targets).
  manual_seed(3);
  GPT gpt(tiny_gpt(kFloat64));
  const data::Example all = sequences();
  auto loss_of = [&](int64_t from, int64_t to) {
    return GPT::loss(gpt.forward(all.input.slice(0, from, to)), all.target.slice(0, from, to))
        .item();
  };
  const double mean_of_means = (loss_of(0, 2) + loss_of(2, 4)) / 2;
  EXPECT_NEAR(per_batch.step_losses[0], mean_of_means, 1e-12 * mean_of_means);
  // Unlike the step's token-weighted mean, its gradient weighs 2 targets as much as 30: the
  // weights after two steps are far apart (the token-weighted runs agree to 1e-12).
  EXPECT_GT(max_weight_difference(whole, per_batch), 1e-3);  // 1.2e-2 measured
}

// A step whose batch holds no trained target takes no optimizer step (as Lightning's
// training_step returning None): the weights and the optimizer's state (AdamW's moments and step
// count, which its zero gradient and weight decay would still have moved) after a run whose
// second step trains nothing are those after its first step; the step still counts and has no
// loss.
TEST(TokenWeightedLoss, AStepWithoutTrainedTargetsLeavesWeightsAndOptimizerState) {
  const auto run = [](int64_t steps, std::vector<std::vector<double>>& weights,
                      optim::OptimizerState& state) {
    train::Trainer trainer(trainer_options(steps, 1));
    LanguageModel lm(std::make_shared<GPT>(tiny_gpt(trainer.precision_plugin().param_dtype())),
                     {.lr = 3e-3, .warmup_steps = 0, .token_weighted = true});
    data::Example all = sequences();
    // The second batch of two sequences: every target ignored.
    all.target.slice(0, 2, 4).fill_(static_cast<double>(data::kIgnoreIndex));
    data::DataLoader loader(std::make_shared<data::TensorDataset>(all.input, all.target), 2);
    trainer.fit(lm, loader);
    EXPECT_EQ(trainer.global_step(), steps);
    for (const Tensor& p : lm.parameters()) weights.push_back(p.contiguous().to_vector<double>());
    state = trainer.optimizer()->state_dict();
    return trainer.step_losses();
  };
  std::vector<std::vector<double>> w1, w2;
  optim::OptimizerState s1, s2;
  run(1, w1, s1);
  const std::vector<double> losses = run(2, w2, s2);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(s1.meta, s2.meta);
  ASSERT_EQ(s1.tensors.size(), s2.tensors.size());
  for (const auto& [name, t] : s1.tensors) {
    ASSERT_TRUE(s2.tensors.contains(name)) << name;
    EXPECT_EQ(t.to(kFloat64).contiguous().to_vector<double>(),
              s2.tensors.at(name).to(kFloat64).contiguous().to_vector<double>())
        << name;
  }
}

}  // namespace
}  // namespace mantissa::models
