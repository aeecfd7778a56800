// A checkpoint's optimizer state in another dtype than its parameter and optimizer imply is
// damage (a header that relabels BF16 bytes as F16): restore_checkpoint refuses it naming the
// tensor, its parameter, the stored dtype and the expected one. Optimizer::load_state_dict
// alone converts such state value by value (as torch does), which resumed other numbers
// without a word. State saved in another precision's dtype for its own weights still resumes.
#include <gtest/gtest.h>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;
using testing::flat_params;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

struct StateRun {
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<TinyModule> module;
};

// A run of `steps` optimizer steps (0: set up only) in `precision` with AdamW or AdamW8bit.
StateRun run(const std::string& precision, bool adamw8bit, int64_t steps) {
  TrainerOptions o = quiet_options(precision);
  o.seed = 5;
  o.max_steps = steps;
  o.max_epochs = steps == 0 ? 0 : -1;
  TinyOptions t;
  t.adamw = !adamw8bit;
  t.adamw8bit = adamw8bit;
  t.lr = 0.01;
  StateRun r{std::make_unique<Trainer>(o), std::make_unique<TinyModule>(t)};
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/false);
  r.trainer->fit(*r.module, loader);
  return r;
}

Tensor& tensor_named(CheckpointContents& c, const std::string& name) {
  for (auto& [n, t] : c.tensors)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

// The same bytes under another dtype of the same width: what a relabelled header loads as.
Tensor relabelled(const Tensor& t, DType as) {
  EXPECT_EQ(t.dtype().itemsize(), as.itemsize());
  return from_buffer(t.contiguous().data_ptr(), as, t.shape());
}

TEST(CheckpointStateDtypes, RelabelledBf16MomentIsRefusedNamingTensorAndBothDtypes) {
  StateRun a = run("bf16-true", /*adamw8bit=*/false, 2);
  CheckpointContents c = collect_checkpoint(*a.trainer);
  Tensor& exp_avg = tensor_named(c, "optimizer.0.state.0.exp_avg");
  ASSERT_EQ(exp_avg.dtype(), kBFloat16);  // AdamW keeps a bf16 parameter's moments in bf16
  exp_avg = relabelled(exp_avg, kFloat16);
  StateRun b = run("bf16-true", false, 0);
  const std::vector<float> before = flat_params(*b.module);
  EXPECT_EQ(error_of([&] { restore_checkpoint(*b.trainer, c, "ck.safetensors"); }),
            "[checkpoint] ck.safetensors: tensor 'optimizer.0.state.0.exp_avg' is stored as F16 "
            "(float16), but AdamW keeps the exp_avg of the bfloat16 parameter 'net.0.weight' in "
            "BF16 (bfloat16): the file is damaged (its header gives the tensor another dtype "
            "than the one it was written in); use an earlier checkpoint");
  EXPECT_EQ(flat_params(*b.module), before);
  EXPECT_EQ(b.trainer->global_step(), 0);
}

TEST(CheckpointStateDtypes, WiderFloat32MomentIsRefused) {
  StateRun a = run("32-true", false, 2);
  CheckpointContents c = collect_checkpoint(*a.trainer);
  Tensor& sq = tensor_named(c, "optimizer.0.state.3.exp_avg_sq");
  sq = sq.to(kFloat64);
  StateRun b = run("32-true", false, 0);
  const std::string msg = error_of([&] { restore_checkpoint(*b.trainer, c, "ck.safetensors"); });
  EXPECT_NE(msg.find("tensor 'optimizer.0.state.3.exp_avg_sq' is stored as F64 (float64), but "
                     "AdamW keeps the exp_avg_sq of the float32 parameter 'net.2.bias' in F32 "
                     "(float32)"),
            std::string::npos)
      << msg;
}

// The 8-bit optimizers keep 32-bit moments in fp32 whatever the parameter's dtype.
TEST(CheckpointStateDtypes, AdamW8bitMomentsOfBf16ParametersMustBeFloat32) {
  StateRun a = run("bf16-true", /*adamw8bit=*/true, 2);
  CheckpointContents c = collect_checkpoint(*a.trainer);
  Tensor& exp_avg = tensor_named(c, "optimizer.0.state.1.exp_avg");
  ASSERT_EQ(exp_avg.dtype(), kFloat32);
  exp_avg = exp_avg.to(kBFloat16);
  StateRun b = run("bf16-true", true, 0);
  const std::string msg = error_of([&] { restore_checkpoint(*b.trainer, c, "ck.safetensors"); });
  EXPECT_NE(msg.find("tensor 'optimizer.0.state.1.exp_avg' is stored as BF16 (bfloat16), but "
                     "AdamW8bit keeps the exp_avg of the bfloat16 parameter 'net.0.bias' in F32 "
                     "(float32)"),
            std::string::npos)
      << msg;
}

// State is checked against the dtype of the weights it was written for (the file's), not the
// resumed run's: a bf16-true checkpoint resumes in 32-true, its bf16 moments widened.
TEST(CheckpointStateDtypes, StateOfAnotherPrecisionsWeightsStillResumes) {
  StateRun a = run("bf16-true", false, 2);
  const CheckpointContents c = collect_checkpoint(*a.trainer);
  StateRun b = run("32-true", false, 0);
  restore_checkpoint(*b.trainer, c, "ck.safetensors");
  EXPECT_EQ(b.trainer->global_step(), 2);
  const Tensor saved = a.trainer->optimizer()->state_dict().tensors.at("state.0.exp_avg");
  const Tensor loaded = b.trainer->optimizer()->state_dict().tensors.at("state.0.exp_avg");
  EXPECT_EQ(loaded.dtype(), kFloat32);
  EXPECT_EQ(loaded.to_vector<float>(), saved.to(kFloat32).to_vector<float>());
}

}  // namespace
}  // namespace mantissa::train
