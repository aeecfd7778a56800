// Checkpoint files (safetensors): resume bit for bit from mid-epoch and end-of-epoch
// checkpoints (32-true and 16-mixed with dropout), missing and corrupt files, ModelCheckpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "mantissa/io/safetensors.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/precisions/mixed_precision.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mantissa_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TinyOptions dropout_adamw() {
  TinyOptions t;
  t.adamw = true;
  t.lr = 0.01;
  t.dropout = 0.3;  // consumes the default generator: its state must be restored
  t.schedulers = [](optim::Optimizer& opt) {
    return std::vector<LRSchedulerConfig>{
        {std::make_shared<optim::CosineAnnealingLR>(opt, 8), "step", 1},
        {std::make_shared<optim::StepLR>(opt, 1, 0.9), "epoch", 1}};
  };
  return t;
}

// Trains 2 epochs of 4 batches; saves after global step `save_after_step` (mid-epoch) and at
// the end of epoch 0 when paths are given. Returns the step losses.
std::vector<double> run(const std::string& precision, const std::string& resume_from,
                        const std::string& mid_path = "", const std::string& end_path = "") {
  TrainerOptions o = quiet_options(precision);
  o.seed = 17;
  o.max_epochs = 2;
  auto cb = std::make_shared<LambdaCallback>();
  cb->batch_end = [&](Trainer& t, int64_t) {
    if (!mid_path.empty() && t.global_step() == 2) t.save_checkpoint(mid_path);
  };
  cb->epoch_end = [&](Trainer& t) {
    if (!end_path.empty() && t.current_epoch() == 0) t.save_checkpoint(end_path);
  };
  o.callbacks.push_back(cb);
  Trainer trainer(o);
  TinyModule module(dropout_adamw());
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  trainer.fit(module, loader, nullptr, resume_from);
  return trainer.step_losses();
}

class ResumeBitForBit : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeBitForBit, MidEpochAndEndOfEpoch) {
  const fs::path dir = temp_dir(std::string("resume_") + GetParam());
  const std::string mid = (dir / "mid.safetensors").string();
  const std::string end = (dir / "end.safetensors").string();
  const std::vector<double> full = run(GetParam(), "", mid, end);
  ASSERT_EQ(full.size(), 8u);
  const std::vector<double> from_mid = run(GetParam(), mid);
  const std::vector<double> from_end = run(GetParam(), end);
  // step_losses() covers the whole run: the saved history, then the resumed steps.
  ASSERT_EQ(from_mid.size(), 8u);
  ASSERT_EQ(from_end.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(from_mid[i], full[i]) << "step " << i;
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(from_end[i], full[i]) << "step " << i;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ResumeBitForBit, ::testing::Values("32-true", "16-mixed"));

// fit() stopped by max_steps inside an epoch, then Trainer::save_checkpoint: the resumed run
// trains the rest of that epoch (and steps the epoch scheduler once at its end), as the run that
// never stopped. The checkpoint records the position inside the epoch, not the start of the
// next one, which would skip the epoch's last batches.
TEST_P(ResumeBitForBit, AfterMaxStepsStoppedInsideAnEpoch) {
  const fs::path dir = temp_dir(std::string("max_steps_") + GetParam());
  const std::string path = (dir / "stopped.safetensors").string();
  const std::vector<double> full = run(GetParam(), "");
  ASSERT_EQ(full.size(), 8u);
  for (int64_t stop : {3, 5}) {
    TrainerOptions o = quiet_options(GetParam());
    o.seed = 17;
    o.max_epochs = 2;
    o.max_steps = stop;
    Trainer trainer(o);
    TinyModule module(dropout_adamw());
    data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
    trainer.fit(module, loader);
    ASSERT_EQ(trainer.global_step(), stop);
    trainer.save_checkpoint(path);
    const std::vector<double> resumed = run(GetParam(), path);
    ASSERT_EQ(resumed.size(), 8u) << "stopped at " << stop;
    for (size_t i = 0; i < 8; ++i)
      EXPECT_EQ(resumed[i], full[i]) << "stopped at " << stop << ", step " << i;
  }
  fs::remove_all(dir);
}

// The steps the GradScaler skipped before a checkpoint count in the resumed run's total
// (loss_scale_state(), which `mantissa train` reports as skipped_steps and in its epoch lines):
// a resumed run reports the run's 10 skipped steps, not the 1 it skipped itself.
TEST(CheckpointFiles, Fp16MixedResumeKeepsTheSkippedStepCount) {
  const fs::path dir = temp_dir("skipped_steps");
  const std::string mid = (dir / "mid.safetensors").string();
  auto fit = [&](const std::string& resume_from, const std::string& save_path) {
    TrainerOptions o = quiet_options("16-mixed");
    o.seed = 6;
    o.max_epochs = 2;
    auto cb = std::make_shared<LambdaCallback>();
    cb->batch_end = [&](Trainer& t, int64_t) {
      if (!save_path.empty() && t.global_step() == 3) t.save_checkpoint(save_path);
    };
    o.callbacks.push_back(cb);
    Trainer trainer(o);
    TinyOptions to;
    // Steps 0, 1 (before the checkpoint) and 5 (after it) overflow float16 and are skipped.
    to.loss_multiplier = [](int64_t step) { return step < 2 || step == 5 ? 1e6 : 1.0; };
    TinyModule module(to);
    data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);  // 4 batches
    trainer.fit(module, loader, nullptr, resume_from);
    return *trainer.precision_plugin().loss_scale_state();
  };
  const auto straight = fit("", mid);
  EXPECT_EQ(straight.skipped_steps, 3);
  EXPECT_EQ(straight.scale, 8192.0);  // 65536 backed off three times
  const auto resumed = fit(mid, "");
  EXPECT_EQ(resumed.skipped_steps, 3);
  EXPECT_EQ(resumed.scale, 8192.0);
  // The count travels next to PyTorch's GradScaler keys; a damaged one is refused by name.
  MixedPrecision plugin("16-mixed");
  nlohmann::json state = plugin.state_dict();
  state["skipped_steps"] = -1;
  EXPECT_NE(
      mantissa::testing::error_of([&] { plugin.load_state_dict(state); }).find("'skipped_steps'"),
      std::string::npos);
  fs::remove_all(dir);
}

using mantissa::testing::error_of;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file by hand: little-endian header length, header JSON, data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(CheckpointFiles, MissingAndCorruptFilesAreClearErrorsAndChangeNothing) {
  const fs::path dir = temp_dir("corrupt");
  const std::string good = (dir / "good.safetensors").string();
  {
    TrainerOptions o = quiet_options();
    o.seed = 2;
    Trainer t(o);
    TinyModule m;
    data::DataLoader loader(testing::tiny_dataset(16), 8);
    t.fit(m, loader);
    t.save_checkpoint(good);
  }
  const std::string bytes = read_all(good);
  const std::string truncated = (dir / "truncated.safetensors").string();
  write_all(truncated, bytes.substr(0, bytes.size() / 2));
  const std::string bad_json = (dir / "bad_json.safetensors").string();
  write_all(bad_json, safetensors_bytes("{\"a\": [1, 2", ""));
  const std::string out_of_range = (dir / "offsets.safetensors").string();
  write_all(out_of_range,
            safetensors_bytes(
                R"({"model.net.0.weight":{"dtype":"F32","shape":[8,4],"data_offsets":[0,128]}})",
                std::string(16, '\0')));

  TrainerOptions o = quiet_options();
  o.seed = 3;
  o.max_epochs = 1;
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  for (const std::string& path :
       {(dir / "missing.safetensors").string(), truncated, bad_json, out_of_range}) {
    const std::string before = fs::exists(path) ? read_all(path) : "";
    Trainer t(o);
    const std::string msg = error_of([&] { t.fit(module, loader, nullptr, path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_EQ(t.global_step(), 0) << path;  // nothing trained on a failed resume
    if (fs::exists(path)) EXPECT_EQ(read_all(path), before) << path;
  }
  EXPECT_NE(error_of([&] {
              Trainer t(o);
              t.fit(module, loader, nullptr, (dir / "missing.safetensors").string());
            }).find("does not exist"),
            std::string::npos);
  // A directory given where the file belongs names the file it probably meant.
  const std::string dir_msg = error_of([&] {
    Trainer t(o);
    t.fit(module, loader, nullptr, dir.string() + "/");
  });
  EXPECT_NE(dir_msg.find("is a directory; give a checkpoint such as " + dir.string() +
                         "/last.safetensors"),
            std::string::npos)
      << dir_msg;
  EXPECT_EQ(read_all(good), bytes);
  fs::remove_all(dir);
}

// A checkpoint whose weights hold NaN or inf (a damaged file, or a run that had diverged) is
// refused with the parameter's name, by --resume (nothing trained, nothing changed) and by
// validate's ckpt_path, instead of training or evaluating to a NaN loss.
TEST(CheckpointFiles, NonFiniteWeightsAreRefusedByName) {
  const fs::path dir = temp_dir("non_finite");
  const std::string good = (dir / "good.safetensors").string();
  TrainerOptions o = quiet_options();
  o.max_epochs = 1;
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  {
    Trainer t(o);
    TinyModule m;
    t.fit(m, loader);
    t.save_checkpoint(good);
  }
  for (float bad : {NAN, INFINITY}) {
    io::SafetensorsFile file = io::load_safetensors(good);
    for (auto& [name, t] : file.tensors) {
      if (name == "model.net.2.weight") t.data<float>()[5] = bad;
    }
    const std::string damaged = (dir / "damaged.safetensors").string();
    io::save_safetensors(damaged, file.tensors, file.metadata);
    Trainer t(o);
    TinyModule module;
    const std::string msg = error_of([&] { t.fit(module, loader, nullptr, damaged); });
    EXPECT_NE(msg.find("parameter 'net.2.weight' holds a non-finite value"), std::string::npos)
        << msg;
    EXPECT_EQ(t.global_step(), 0);
    Trainer v(o);
    TinyModule fresh;
    const std::string eval_msg = error_of([&] { v.validate(fresh, loader, damaged); });
    EXPECT_NE(eval_msg.find(damaged), std::string::npos) << eval_msg;
    EXPECT_NE(eval_msg.find("'net.2.weight' holds a non-finite value"), std::string::npos)
        << eval_msg;
  }
  fs::remove_all(dir);
}

namespace {
// Trains a tiny module in nf4, nf4-dq and int8, saves a checkpoint, then for each float32
// tensor of the quantized storage whose name ends in one of `leaves` writes `value` into its
// first element and checks that resuming and validating from that file are refused with a
// message holding "'<tensor>' of a quantized layer's stored weight " + `what` (and the file's
// path for validate), while the undamaged file validates. Returns the tensors damaged.
int expect_damaged_quantized_storage_refused(const std::string& dir_name,
                                             const std::set<std::string>& leaves, float value,
                                             const std::string& what) {
  const fs::path dir = temp_dir(dir_name);
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  int damaged_tensors = 0;
  for (const char* precision : {"nf4", "nf4-dq", "int8"}) {
    SCOPED_TRACE(precision);
    TrainerOptions o = quiet_options(precision);
    o.max_epochs = 1;
    // Every module starts alike: nf4-dq's quant state (JSON) has the length of its numbers.
    o.seed = 7;
    const std::string good = (dir / "good.safetensors").string();
    {
      Trainer t(o);
      TinyModule m;
      t.fit(m, loader);
      t.save_checkpoint(good);
    }
    const io::SafetensorsFile original = io::load_safetensors(good);
    for (const auto& [target, tensor] : original.tensors) {
      const std::string leaf = target.substr(target.rfind('.') + 1);
      if (!leaves.count(leaf) || tensor.dtype() != kFloat32) continue;  // nf4-dq's absmax: codes
      SCOPED_TRACE(target);
      ++damaged_tensors;
      io::SafetensorsFile file = io::load_safetensors(good);
      for (auto& [name, t] : file.tensors) {
        if (name == target) t.data<float>()[0] = value;
      }
      const std::string damaged = (dir / "damaged.safetensors").string();
      io::save_safetensors(damaged, file.tensors, file.metadata);
      const std::string in_model = target.substr(std::string("model.").size());
      const std::string expected =
          "'" + in_model + "' of a quantized layer's stored weight " + what;
      Trainer t(o);
      TinyModule module;
      const std::string msg = error_of([&] { t.fit(module, loader, nullptr, damaged); });
      EXPECT_NE(msg.find(expected), std::string::npos) << msg;
      EXPECT_NE(msg.find("the file is damaged"), std::string::npos) << msg;
      EXPECT_EQ(t.global_step(), 0);
      Trainer v(o);
      TinyModule fresh;
      const std::string eval_msg = error_of([&] { v.validate(fresh, loader, damaged); });
      EXPECT_NE(eval_msg.find(damaged), std::string::npos) << eval_msg;
      EXPECT_NE(eval_msg.find(expected), std::string::npos) << eval_msg;
    }
    // The undamaged file loads.
    Trainer v(o);
    TinyModule fresh;
    EXPECT_EQ(error_of([&] { v.validate(fresh, loader, good); }), "");
  }
  fs::remove_all(dir);
  return damaged_tensors;
}
}  // namespace

// The same for the quantized layers' stored weights: a NaN in a 4-bit layer's absmax,
// nested_absmax or nested_quant_map, or in an int8 layer's SCB, passed the load checks (the
// weights checked were the parameters only), and training then failed with advice to lower the
// learning rate, eval printed a NaN loss. Every floating tensor of that storage is checked (the
// quant_map is also compared with the format's table); the integer codes hold no NaN.
TEST(CheckpointFiles, NonFiniteQuantizedStateIsRefusedByName) {
  const int damaged = expect_damaged_quantized_storage_refused(
      "non_finite_quantized", {"absmax", "nested_absmax", "nested_quant_map", "SCB"}, NAN,
      "holds a non-finite value (nan): the file is damaged");
  // Of each of the 2 layers: nf4's absmax; nf4-dq's nested_absmax, nested_quant_map; int8's SCB.
  EXPECT_EQ(damaged, 2 + 4 + 2);
}

// A negative scale in the same storage (a 4-bit absmax or nested_absmax, an int8 SCB: each a
// largest magnitude) is finite, so it loaded, flipped the sign of the weights it scales and the
// run trained, or eval evaluated, other weights than those saved, without a word. Refused by
// name as a damaged file; the code books (quant_map), which hold negative entries, are not.
TEST(CheckpointFiles, NegativeQuantizedScaleIsRefusedByName) {
  const int damaged = expect_damaged_quantized_storage_refused(
      "negative_quantized", {"absmax", "nested_absmax", "SCB"}, -0.5f,
      "holds a negative scale (-0.5)");
  // Of each of the 2 layers: nf4's absmax; nf4-dq's nested_absmax; int8's SCB.
  EXPECT_EQ(damaged, 2 + 2 + 2);
}

// A filename that leaves dirpath is refused when the callback is built: the checkpoint it would
// write could not be resumed (a restored ModelCheckpoint refuses paths outside dirpath).
TEST(CheckpointFiles, ModelCheckpointFilenameStaysInsideDirpath) {
  for (const char* name : {"../out/{epoch}", "/tmp/{epoch}", "a/../../{epoch}"}) {
    ModelCheckpointOptions mc;
    mc.dirpath = "ck";
    mc.filename = name;
    const std::string err = error_of([&] { ModelCheckpoint checkpoint(mc); });
    EXPECT_NE(err.find("would put checkpoints outside dirpath 'ck'"), std::string::npos) << err;
  }
  ModelCheckpointOptions sub;
  sub.dirpath = "ck";
  sub.filename = "run1/{epoch}";  // a subfolder of dirpath is fine
  EXPECT_NO_THROW(ModelCheckpoint checkpoint(sub));
}

// As Lightning does, a new run warns when its checkpoint directory already holds checkpoints
// (replaying a run's config.json wrote over the first run's files without a word); a run that
// resumes from one of them is continuing that run and does not warn, but one resumed from a
// checkpoint kept elsewhere replaces them as a new run would, and warns.
TEST(CheckpointFiles, NewRunWarnsOfCheckpointsAlreadyInItsDirectory) {
  const fs::path dir = temp_dir("not_empty");
  auto fit = [&](const std::string& resume, bool save_last = true) {
    ModelCheckpointOptions mc;
    mc.dirpath = dir.string();
    mc.save_last = save_last;
    TrainerOptions o = quiet_options();
    o.seed = 3;
    o.max_epochs = resume.empty() ? 1 : 2;
    o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
    Trainer trainer(o);
    TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(16), 8);
    ::testing::internal::CaptureStderr();
    trainer.fit(module, loader, nullptr, resume);
    return ::testing::internal::GetCapturedStderr();
  };
  EXPECT_EQ(fit("").find("already holds checkpoints"), std::string::npos);  // empty directory
  const std::string again = fit("");
  EXPECT_NE(again.find("warning: checkpoint directory '" + dir.string() +
                       "' already holds checkpoints of an earlier run"),
            std::string::npos)
      << again;
  EXPECT_NE(again.find("resume from '" + (dir / "last.safetensors").string() + "'"),
            std::string::npos)
      << again;
  EXPECT_NE(again.find("this run's last.safetensors replaces theirs"), std::string::npos) << again;
  // Without save_last this run writes no last.safetensors, and the warning does not say it will.
  const std::string no_last = fit("", false);
  EXPECT_NE(no_last.find("this run's checkpoints whose names are taken get a version (-v1"),
            std::string::npos)
      << no_last;
  EXPECT_EQ(no_last.find("last.safetensors replaces"), std::string::npos) << no_last;
  const std::string resumed = fit((dir / "last.safetensors").string());
  EXPECT_EQ(resumed.find("already holds checkpoints"), std::string::npos) << resumed;
  // The same checkpoint copied to another directory: resuming from there warns.
  const fs::path elsewhere = temp_dir("not_empty_elsewhere");
  fs::copy_file(dir / "last.safetensors", elsewhere / "last.safetensors",
                fs::copy_options::overwrite_existing);
  const std::string from_elsewhere = fit((elsewhere / "last.safetensors").string());
  EXPECT_NE(from_elsewhere.find("already holds checkpoints of an earlier run"), std::string::npos)
      << from_elsewhere;
  fs::remove_all(dir);
  fs::remove_all(elsewhere);
}

TEST(CheckpointFiles, ModelCheckpointKeepsTheBestAndTheLast) {
  const fs::path dir = temp_dir("model_checkpoint");
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.mode = "min";
  mc.save_top_k = 2;
  mc.save_last = true;
  mc.filename = "{epoch}-{val_loss}";
  auto checkpoint = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = quiet_options();
  o.seed = 4;
  o.max_epochs = 4;
  o.callbacks.push_back(checkpoint);
  Trainer trainer(o);
  TinyModule module(TinyOptions{.lr = 0.5});
  data::DataLoader train(testing::tiny_dataset(32), 8, true, 1);
  data::DataLoader val(testing::tiny_dataset(32), 16);  // the training set: the loss falls
  trainer.fit(module, train, &val);
  EXPECT_EQ(checkpoint->best_k_models().size(), 2u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".safetensors";
  EXPECT_EQ(files, 3);  // the best two and last
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  ASSERT_TRUE(checkpoint->best_model_score().has_value());
  for (const auto& [path, score] : checkpoint->best_k_models()) {
    EXPECT_TRUE(fs::exists(path));
    EXPECT_GE(score, *checkpoint->best_model_score());
  }
  EXPECT_NE(checkpoint->best_model_path().find("-val_loss=0."), std::string::npos)
      << checkpoint->best_model_path();
  EXPECT_EQ(checkpoint->best_model_path().rfind(mc.dirpath + "/epoch=", 0), 0u);
  // A monitor that is never logged is an error naming it.
  ModelCheckpointOptions bad = mc;
  bad.monitor = "val_acc";
  TrainerOptions o2 = quiet_options();
  o2.callbacks.push_back(std::make_shared<ModelCheckpoint>(bad));
  Trainer t2(o2);
  TinyModule m2;
  try {
    t2.fit(m2, train, &val);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("monitor='val_acc'"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mantissa::train
