// --checkpoint-monitor and --early-stopping-monitor name a metric the reference model logs while
// it trains; another name (a typo such as val_los, or test_loss, logged only after training) is
// refused before anything trains, with the likely name and the list. It was found missing at the
// first check, after an epoch of training, with no checkpoint written.
#include <gtest/gtest.h>

#include "mantissa/models/image_classifier.h"
#include "mantissa/models/language_model.h"
#include "mantissa/recipes/trainer_setup.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;

TEST(MonitorNames, AMetricTheModelDoesNotLogIsRefusedBeforeTraining) {
  TrainOptions o;
  o.model = "mlp";
  o.checkpoint_dir = "unused";
  o.checkpoint_monitor = "val_los";
  expect_error([&] { make_trainer_options(o); },
               {"[train] --checkpoint-monitor 'val_los' is not a metric the mlp logs while it "
                "trains (did you mean val_loss?); it logs train_loss, val_loss, val_acc"});
  o.checkpoint_monitor = "val_loss";
  o.early_stopping_monitor = "test_acc";
  expect_error([&] { make_trainer_options(o); },
               {"--early-stopping-monitor 'test_acc' is not a metric the mlp logs while it trains",
                "it logs train_loss, val_loss, val_acc"});

  TrainOptions g;
  g.model = "gpt";
  g.early_stopping_monitor = "val_ppx";
  expect_error([&] { make_trainer_options(g); },
               {"--early-stopping-monitor 'val_ppx' is not a metric the gpt logs while it trains "
                "(did you mean val_ppl?); it logs train_loss, val_loss, val_ppl, val_bpb"});
  g.early_stopping_monitor = "val_acc";  // the image models' metric
  expect_error([&] { make_trainer_options(g); }, {"the gpt logs"});
}

// finetune trains a LanguageModel, as the GPT does: its monitors are checked against those
// metrics, in its own name (they were checked against the mlp's, so val_ppl was refused and
// val_acc failed only once training had started).
TEST(MonitorNames, AFineTuneIsCheckedAgainstTheLanguageModelsMetrics) {
  TrainOptions o;  // finetune leaves --model at its default
  o.checkpoint_dir = "unused";
  for (const std::string& name : models::LanguageModel::fit_metric_names()) {
    o.checkpoint_monitor = name;
    o.early_stopping_monitor = name;
    EXPECT_NO_THROW(make_trainer_options(o, "finetune")) << name;
  }
  o.early_stopping_monitor = "val_acc";
  expect_error([&] { make_trainer_options(o, "finetune"); },
               {"[finetune] --early-stopping-monitor 'val_acc' is not a metric a fine-tune logs "
                "while it trains; it logs train_loss, val_loss, val_ppl, val_bpb"});
}

TEST(MonitorNames, EveryMetricTheModelLogsIsAccepted) {
  for (const std::string& model : {"mlp", "cnn", "vit", "gpt"}) {
    const auto& names = model == "gpt" ? models::LanguageModel::fit_metric_names()
                                       : models::ImageClassifier::fit_metric_names();
    for (const std::string& name : names) {
      TrainOptions o;
      o.model = model;
      o.checkpoint_dir = "unused";
      o.checkpoint_monitor = name;
      o.early_stopping_monitor = name;
      EXPECT_NO_THROW(make_trainer_options(o)) << model << " " << name;
    }
  }
}

}  // namespace
}  // namespace mantissa::recipes
