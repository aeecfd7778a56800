// A transformer-engine checkpoint's FP8 state (docs/fp8.md "Checkpointed state"). The tensors
// <layer>.fp8_scale and <layer>.fp8_amax_history are the state: an evaluation
// (Trainer::validate with a checkpoint, `mantissa eval`) and a resume (Trainer::fit with one,
// `--resume`) both load them, and both refuse a value no run writes, naming the tensor and the
// value. The precision plugin's JSON copy of that state must equal the tensors: a resume, which
// restores that copy too, refuses a file whose copies differ. Evaluating a clean file and
// evaluating after resuming from it give the same loss and the same state.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/trainer.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TrainerOptions fp8_options(int64_t max_steps) {
  TrainerOptions o = quiet_options("transformer-engine");
  o.max_epochs = 2;
  o.max_steps = max_steps;
  o.seed = 7;
  o.precision_options = {{"fp8_amax_history_len", "4"}};
  return o;
}

TinyOptions module_options() { return {.lr = 0.05, .adamw = true}; }

// The state after 3 training steps of the tiny net (FP8 layers net.0 and net.2).
CheckpointContents trained_contents() {
  Trainer trainer(fp8_options(3));
  TinyModule module(module_options());
  TinyLoaders loaders;
  trainer.fit(module, loaders.train, &loaders.val);
  return collect_checkpoint(trainer);
}

// `c` with element `index` of tensor `key` set to `value`.
CheckpointContents with_value(CheckpointContents c, const std::string& key, int64_t index,
                              float value) {
  bool found = false;
  for (auto& [name, t] : c.tensors) {
    if (name != key) continue;
    EXPECT_EQ(t.dtype(), kFloat32) << key;
    t = t.clone();
    t.data<float>()[index] = value;
    found = true;
  }
  EXPECT_TRUE(found) << key;
  return c;
}

// `c` with the plugin's JSON copy of layer net.0's scale [slot] set to `value`.
CheckpointContents with_meta_scale(CheckpointContents c, int slot, double value) {
  auto meta = nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
  meta["precision_plugin"]["TransformerEnginePrecision"]["fp8_meta"]["net.0"]["scale"][slot] =
      value;
  c.metadata[kCheckpointMetadataKey] = meta.dump();
  return c;
}

std::string write(const mantissa::testing::TempDir& dir, const std::string& name,
                  const CheckpointContents& c) {
  const std::string path = dir.file(name);
  save_checkpoint_file(path, c);
  return path;
}

// What evaluating the file says ("" when it evaluates).
std::string eval_error(const std::string& path) {
  Trainer trainer(fp8_options(3));
  TinyModule module(module_options());
  TinyLoaders loaders;
  try {
    trainer.validate(module, loaders.val, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What resuming from the file says ("" when it resumes and trains on).
std::string resume_error(const std::string& path) {
  Trainer trainer(fp8_options(5));
  TinyModule module(module_options());
  TinyLoaders loaders;
  try {
    trainer.fit(module, loaders.train, &loaders.val, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct BadValue {
  std::string key;
  int64_t index;
  float value;
  std::string says;  // what both paths' message holds
};

TEST(Fp8CheckpointState, EvalAndResumeRefuseTheSameBadScalesAndAmaxesByName) {
  const CheckpointContents clean = trained_contents();
  mantissa::testing::TempDir dir;
  // The history is [4 rows, 3 slots] row-major: index 4 is row 1, slot 1 (weight).
  const std::vector<BadValue> bad = {
      {"model.net.0.fp8_scale", 1, kInf,
       "'net.0.fp8_scale' holds the scale inf at slot 1 (weight)"},
      {"model.net.0.fp8_scale", 0, -2.0f, "'net.0.fp8_scale' holds the scale -2 at slot 0 (input)"},
      {"model.net.2.fp8_scale", 2, kNaN,
       "'net.2.fp8_scale' holds the scale nan at slot 2 (grad_output)"},
      {"model.net.2.fp8_scale", 1, 0.0f, "'net.2.fp8_scale' holds the scale 0 at slot 1 (weight)"},
      {"model.net.0.fp8_amax_history", 4, -kInf,
       "'net.0.fp8_amax_history' holds the amax -inf at row 1, slot 1 (weight)"},
      {"model.net.0.fp8_amax_history", 9, kNaN,
       "'net.0.fp8_amax_history' holds the amax nan at row 3, slot 0 (input)"},
      {"model.net.2.fp8_amax_history", 5, -0.5f,
       "'net.2.fp8_amax_history' holds the amax -0.5 at row 1, slot 2 (grad_output)"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(bad[i].says);
    const std::string path = write(dir, "bad" + std::to_string(i) + ".safetensors",
                                   with_value(clean, bad[i].key, bad[i].index, bad[i].value));
    for (const std::string& what : {eval_error(path), resume_error(path)}) {
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(bad[i].says), std::string::npos) << what;
      EXPECT_NE(what.find("use an earlier checkpoint"), std::string::npos) << what;
    }
  }
  // +inf in the history is a state a run writes (an inf in a tensor stays in the window, as in
  // TransformerEngine): both paths take it.
  const std::string inf_path = write(dir, "inf_amax.safetensors",
                                     with_value(clean, "model.net.0.fp8_amax_history", 7, kInf));
  EXPECT_EQ(eval_error(inf_path), "");
}

TEST(Fp8CheckpointState, AResumeRefusesAPluginCopyThatDiffersFromTheTensors) {
  const CheckpointContents clean = trained_contents();
  mantissa::testing::TempDir dir;
  // A valid but different scale in the tensor: eval would cast with it, the resume would have
  // restored the plugin's copy over it. The tensors are the state: eval takes them, the resume
  // refuses the file.
  const std::string tensor_edited =
      write(dir, "tensor.safetensors", with_value(clean, "model.net.0.fp8_scale", 1, 2.0f));
  EXPECT_EQ(eval_error(tensor_edited), "");
  const std::string r1 = resume_error(tensor_edited);
  EXPECT_NE(r1.find("the two copies of the FP8 state of layer 'net.0' differ: the tensor "
                    "'model.net.0.fp8_scale' holds 2 at index 1 but the precision plugin's "
                    "fp8_meta scale holds "),
            std::string::npos)
      << r1;
  // The same in the plugin's copy alone.
  const std::string meta_edited = write(dir, "meta.safetensors", with_meta_scale(clean, 1, 2.0));
  EXPECT_EQ(eval_error(meta_edited), "");
  const std::string r2 = resume_error(meta_edited);
  EXPECT_NE(r2.find("fp8_meta scale holds 2 there"), std::string::npos) << r2;
  // A value no run writes in the plugin's copy is named as in the tensors.
  const std::string meta_bad = write(dir, "meta_bad.safetensors", with_meta_scale(clean, 0, -1.0));
  const std::string r3 = resume_error(meta_bad);
  EXPECT_NE(r3.find("the scale of the fp8_meta of layer 'net.0' holds the scale -1 at slot 0 "
                    "(input)"),
            std::string::npos)
      << r3;
  // And the clean file resumes.
  EXPECT_EQ(resume_error(write(dir, "clean.safetensors", clean)), "");
}

// The FP8 state tensors of a module, in order.
std::vector<float> fp8_state_of(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, t] : m.state_dict()) {
    if (name.find("fp8_") == std::string::npos) continue;
    const auto v = t.to(kFloat32).contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(Fp8CheckpointState, EvalOfTheFileEqualsEvalAfterResumingFromIt) {
  const CheckpointContents clean = trained_contents();
  std::vector<float> saved;
  for (const auto& [name, t] : clean.tensors) {
    if (name.find("fp8_") == std::string::npos) continue;
    const auto v = t.to(kFloat32).contiguous().to_vector<float>();
    saved.insert(saved.end(), v.begin(), v.end());
  }
  ASSERT_EQ(saved.size(), 2u * (3 + 4 * 3));
  mantissa::testing::TempDir dir;
  const std::string path = write(dir, "clean.safetensors", clean);

  Trainer evaluator(fp8_options(3));
  TinyModule evaluated(module_options());
  TinyLoaders loaders;
  const auto by_eval = evaluator.validate(evaluated, loaders.val, path);

  // Resumed at its own step 3 with max_steps 3: nothing trains; the state is the file's.
  Trainer resumer(fp8_options(3));
  TinyModule resumed(module_options());
  resumer.fit(resumed, loaders.train, nullptr, path);
  EXPECT_EQ(fp8_state_of(resumed), saved);
  const auto after_resume = resumer.validate(resumed, loaders.val);

  ASSERT_TRUE(by_eval.count("val_loss"));
  EXPECT_EQ(after_resume.at("val_loss"), by_eval.at("val_loss"));
  // Both evaluations recorded the same amaxes into the same state.
  EXPECT_EQ(fp8_state_of(resumed), fp8_state_of(evaluated));
}

}  // namespace
}  // namespace mantissa::train::testing
