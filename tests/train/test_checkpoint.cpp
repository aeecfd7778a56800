// Checkpoint state: collect/restore round trips, validate-then-commit on every kind of bad
// content (the module and optimizer stay untouched), precision conversion with a warning.
// The file-level tests (resume bit for bit, corrupt files, ModelCheckpoint) are in
// test_checkpoint_files.cpp.
#include <gtest/gtest.h>

#include "mantissa/core/warning.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

using mantissa::testing::expect_error;
using testing::flat_params;

TinyOptions adamw_with_scheduler() {
  TinyOptions t;
  t.adamw = true;
  t.lr = 0.01;
  t.schedulers = [](optim::Optimizer& opt) {
    return std::vector<LRSchedulerConfig>{
        {std::make_shared<optim::StepLR>(opt, 2, 0.5), "step", 1}};
  };
  return t;
}

// A trainer that trained `steps` steps, with its module.
struct TrainedRun {
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<TinyModule> module;
};

TrainedRun trained(const std::string& precision, int64_t steps, uint64_t seed = 21) {
  TrainerOptions o = quiet_options(precision);
  o.seed = seed;
  o.max_steps = steps;
  o.max_epochs = -1;
  TrainedRun r{std::make_unique<Trainer>(o), std::make_unique<TinyModule>(adamw_with_scheduler())};
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 3);
  r.trainer->fit(*r.module, loader);
  return r;
}

// A trainer set up (module built, optimizer configured) without training.
TrainedRun fresh(const std::string& precision, uint64_t seed = 99) {
  TrainerOptions o = quiet_options(precision);
  o.seed = seed;
  o.max_epochs = 0;
  TrainedRun r{std::make_unique<Trainer>(o), std::make_unique<TinyModule>(adamw_with_scheduler())};
  // The data trained() uses: its checkpoints are taken inside an epoch, whose rest a resumed
  // run can only train from the same examples in the same order.
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 3);
  r.trainer->fit(*r.module, loader);
  return r;
}

TEST(Checkpoint, RestoreRoundTripsEveryPiece) {
  TrainedRun a = trained("16-mixed", 3);
  const CheckpointContents c = collect_checkpoint(*a.trainer);
  EXPECT_TRUE(c.metadata.count(kCheckpointMetadataKey));
  bool has_model = false, has_opt = false;
  for (const auto& [name, t] : c.tensors) {
    has_model |= name == "model.net.0.weight";
    has_opt |= name == "optimizer.0.state.0.exp_avg";
  }
  EXPECT_TRUE(has_model && has_opt);

  TrainedRun b = fresh("16-mixed");
  EXPECT_NE(flat_params(*b.module), flat_params(*a.module));
  restore_checkpoint(*b.trainer, c, "memory");
  EXPECT_EQ(flat_params(*b.module), flat_params(*a.module));
  EXPECT_EQ(b.trainer->global_step(), 3);
  // max_steps ended the first epoch after 3 of its 4 batches: the trainer's counters moved on
  // to the next epoch (as Lightning's do), but the checkpoint resumes at the fourth batch.
  EXPECT_EQ(a.trainer->current_epoch(), 1);
  EXPECT_EQ(b.trainer->current_epoch(), 0);
  EXPECT_EQ(b.trainer->batches_in_epoch(), 3);
  EXPECT_EQ(b.trainer->optimizer()->state_dict().meta, a.trainer->optimizer()->state_dict().meta);
  EXPECT_EQ(b.trainer->precision_plugin().scaler()->state_dict(),
            a.trainer->precision_plugin().scaler()->state_dict());
  EXPECT_EQ(b.trainer->lr_schedulers()[0].scheduler->last_epoch(), 3);
  EXPECT_EQ(b.trainer->optimizer()->lr(), a.trainer->optimizer()->lr());
  const auto meta = nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
  EXPECT_EQ(default_generator().state(), meta["rng"].get<std::string>());
  EXPECT_EQ(meta["precision"], "16-mixed");
  EXPECT_TRUE(meta["precision_plugin"].contains("MixedPrecision"));
}

// Every kind of bad content throws naming the problem and leaves the run as it was.
TEST(Checkpoint, BadContentsThrowAndChangeNothing) {
  TrainedRun a = trained("32-true", 2);
  const CheckpointContents good = collect_checkpoint(*a.trainer);
  TrainedRun b = fresh("32-true");
  const std::vector<float> params = flat_params(*b.module);
  const nlohmann::json opt_meta = b.trainer->optimizer()->state_dict().meta;
  const std::string rng = default_generator().state();

  auto expect_rejected = [&](const std::string& what, const std::string& needle,
                             const std::function<void(CheckpointContents&)>& corrupt) {
    CheckpointContents c = good;
    corrupt(c);
    try {
      restore_checkpoint(*b.trainer, c, "ckpt.safetensors");
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << what << ": " << msg;
      EXPECT_NE(msg.find("ckpt.safetensors"), std::string::npos) << what << ": " << msg;
    }
    EXPECT_EQ(flat_params(*b.module), params) << what;
    EXPECT_EQ(b.trainer->optimizer()->state_dict().meta, opt_meta) << what;
    EXPECT_EQ(b.trainer->global_step(), 0) << what;
    EXPECT_EQ(b.trainer->lr_schedulers()[0].scheduler->last_epoch(), 0) << what;
    EXPECT_EQ(default_generator().state(), rng) << what;
  };
  auto tensor_named = [](CheckpointContents& c, const std::string& name) -> Tensor& {
    for (auto& [n, t] : c.tensors) {
      if (n == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  };
  expect_rejected("bad JSON", "not valid JSON",
                  [](CheckpointContents& c) { c.metadata[kCheckpointMetadataKey] = "{oops"; });
  expect_rejected("no metadata", "not a mantissa checkpoint",
                  [](CheckpointContents& c) { c.metadata.clear(); });
  expect_rejected("missing field", "'global_step'", [](CheckpointContents& c) {
    auto j = nlohmann::json::parse(c.metadata[kCheckpointMetadataKey]);
    j.erase("global_step");
    c.metadata[kCheckpointMetadataKey] = j.dump();
  });
  expect_rejected("shape", "shape mismatch for 'model.net.0.weight': 8x5", [&](auto& c) {
    tensor_named(c, "model.net.0.weight") = zeros({8, 5});
  });
  expect_rejected("dtype", "dtype mismatch for 'model.net.2.bias': float16",
                  [&](auto& c) { tensor_named(c, "model.net.2.bias") = zeros({3}, kFloat16); });
  expect_rejected("missing key", "missing [model.net.2.bias]", [](CheckpointContents& c) {
    std::erase_if(c.tensors, [](const auto& kv) { return kv.first == "model.net.2.bias"; });
  });
  expect_rejected("stray tensor", "unexpected tensor 'extra'",
                  [](CheckpointContents& c) { c.tensors.emplace_back("extra", zeros({1})); });
  expect_rejected("scheduler", "LR scheduler 0 is a CosineAnnealingLR", [](auto& c) {
    auto j = nlohmann::json::parse(c.metadata[kCheckpointMetadataKey]);
    j["lr_schedulers"][0]["name"] = "CosineAnnealingLR";
    c.metadata[kCheckpointMetadataKey] = j.dump();
  });
  // The message says which --optimizer to resume with.
  expect_rejected("optimizer kind",
                  "holds SGD state for optimizer 0, but the module's optimizer is AdamW; resume "
                  "with the optimizer the run was trained with (CLI: --optimizer sgd)",
                  [](auto& c) {
                    auto j = nlohmann::json::parse(c.metadata[kCheckpointMetadataKey]);
                    j["optimizers"][0]["optimizer"] = "SGD";
                    c.metadata[kCheckpointMetadataKey] = j.dump();
                  });
  expect_rejected("rng", "corrupt RNG state", [](auto& c) {
    auto j = nlohmann::json::parse(c.metadata[kCheckpointMetadataKey]);
    j["rng"] = "not a generator";
    c.metadata[kCheckpointMetadataKey] = j.dump();
  });
  // Only the optimizer's own loader sees this one, after the weights were loaded: the
  // rollback must put the weights back.
  expect_rejected("optimizer state shape", "exp_avg", [&](auto& c) {
    tensor_named(c, "optimizer.0.state.0.exp_avg") = zeros({2, 2});
  });
}

// save_hyperparameters lands in the checkpoint's metadata as "hyper_parameters" (what eval
// rebuilds the model from); a module without any writes no such key.
TEST(Checkpoint, HyperparametersAreSavedWithTheCheckpoint) {
  TrainedRun a = trained("32-true", 1);
  const auto hparams_of = [](const CheckpointContents& c) {
    return nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
  };
  EXPECT_FALSE(hparams_of(collect_checkpoint(*a.trainer)).contains("hyper_parameters"));
  a.module->save_hyperparameters({{"hidden", "32"}, {"lora-rank", 4}});
  const nlohmann::json meta = hparams_of(collect_checkpoint(*a.trainer));
  ASSERT_TRUE(meta.contains("hyper_parameters"));
  EXPECT_EQ(meta.at("hyper_parameters").at("hidden"), "32");
  EXPECT_EQ(meta.at("hyper_parameters").at("lora-rank"), 4);
  expect_error(
      [&] {
        a.module->save_hyperparameters(nlohmann::json::array({1, 2}));
      },
      "must be a JSON object");
}

TEST(Checkpoint, WeightsFromAnotherPrecisionAreConvertedWithAWarning) {
  TrainedRun a = trained("bf16-true", 2);
  const CheckpointContents c = collect_checkpoint(*a.trainer);
  TrainedRun b = fresh("32-true");
  ::testing::internal::CaptureStderr();
  restore_checkpoint(*b.trainer, c, "half.safetensors");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("half.safetensors was saved in bf16-true"), std::string::npos) << err;
  EXPECT_EQ(flat_params(*b.module), flat_params(*a.module));  // bf16 values, exactly
  for (const auto& p : b.module->parameters()) EXPECT_EQ(p.dtype(), kFloat32);
}

// Between two precisions with float32 weights nothing is converted, and the warning says so.
TEST(Checkpoint, ResumingInAnotherPrecisionWithTheSameWeightsDtypeSaysSo) {
  TrainedRun a = trained("bf16-mixed", 2);
  const CheckpointContents c = collect_checkpoint(*a.trainer);
  TrainedRun b = fresh("16-mixed");
  ::testing::internal::CaptureStderr();
  restore_checkpoint(*b.trainer, c, "mixed.safetensors");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("mixed.safetensors was saved in bf16-mixed and resumes in 16-mixed; its "
                     "weights stay float32"),
            std::string::npos)
      << err;
  EXPECT_EQ(flat_params(*b.module), flat_params(*a.module));
}

// A hand-made file that says bf16-true but holds float32 tensors: each load says once what
// happens to those tensors, not what bf16-true would imply. It said "its bfloat16 weights are
// converted to float32" in a 32-true run (nothing was converted), and nothing at all in a
// bf16-true run, which rounds the float32 weights to bfloat16.
TEST(Checkpoint, AFileWhoseTensorsContradictItsPrecisionWarnsOnceOfWhatTheyBecome) {
  TrainedRun a = trained("32-true", 2);
  CheckpointContents c = collect_checkpoint(*a.trainer);
  auto meta = nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
  meta["precision"] = "bf16-true";
  c.metadata[kCheckpointMetadataKey] = meta.dump();
  for (const auto& [name, t] : c.tensors)
    if (name.rfind("model.", 0) == 0) ASSERT_EQ(t.dtype(), kFloat32) << name;
  mantissa::testing::TempDir dir;
  const std::string path = dir.file("hand.safetensors");
  save_checkpoint_file(path, c);

  const auto warnings_of = [](const std::function<void()>& load) {
    const WarningRecorder recorder;
    ::testing::internal::CaptureStderr();
    load();
    ::testing::internal::GetCapturedStderr();
    return recorder.messages();
  };
  // A resume in 32-true: the float32 weights load as they are.
  TrainedRun b = fresh("32-true");
  EXPECT_EQ(warnings_of([&] { restore_checkpoint(*b.trainer, c, "hand.safetensors"); }),
            std::vector<std::string>{"checkpoint hand.safetensors was saved in bf16-true and "
                                     "resumes in 32-true; its weights stay float32"});
  EXPECT_EQ(flat_params(*b.module), flat_params(*a.module));

  // Evaluations (Trainer::validate with the file), in three precisions.
  data::DataLoader loader(testing::tiny_dataset(16), 8, /*shuffle=*/false, 3);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"32-true", "was saved in bf16-true and is evaluated in 32-true; its weights stay float32"},
      {"bf16-true",
       "was saved in bf16-true but holds weights of another dtype: its float32 weights are "
       "converted to bfloat16 for bf16-true"},
      {"16-true",
       "was saved in bf16-true; its float32 weights are converted to float16 for 16-true"}};
  for (const auto& [precision, said] : expected) {
    SCOPED_TRACE(precision);
    Trainer t(quiet_options(precision));
    TinyModule m{adamw_with_scheduler()};
    const std::vector<std::string> w = warnings_of([&] { t.validate(m, loader, path); });
    // The CPU may add that the precision is emulated on it; of the load, one warning.
    std::vector<std::string> of_the_load;
    for (const std::string& message : w)
      if (message.rfind("checkpoint ", 0) == 0) of_the_load.push_back(message);
    EXPECT_EQ(of_the_load, std::vector<std::string>{"checkpoint " + path + " " + said});
  }
}

}  // namespace
}  // namespace mantissa::train
