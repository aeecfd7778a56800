// Apex's optimisation levels (apex_amp_precision.h): for each level the dtypes of the weights,
// the fp32 master weights, BatchNorm and the activations inside a Trainer step; the loss
// scaling each level does; the options and their errors; a resume keeps the scale.
#include <gtest/gtest.h>

#include "mantissa/mantissa.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/apex_amp_precision.h"
#include "mantissa/train/trainer.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::vals;
using testing::quiet_options;

bool has(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

// conv -> BatchNorm -> ReLU -> Linear on 1x6x6 images, 3 classes; records what the step saw.
class ConvBnModule : public TrainModule {
 public:
  ConvBnModule() : TrainModule("ConvBnModule") {}
  void configure_model() override {
    if (conv) return;
    Generator gen(7);
    conv = std::make_shared<nn::Conv2d>(1, 4, Size2{3, 3}, nn::Conv2dOptions{.padding = {1, 1}},
                                        std::nullopt, &gen);
    bn = std::make_shared<nn::BatchNorm2d>(4);
    fc = std::make_shared<nn::Linear>(4 * 6 * 6, 3);
    register_module("conv", conv);
    register_module("bn", bn);
    register_module("fc", fc);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = conv->forward(x);
    conv_out = h.dtype();
    const Tensor b = bn->forward(h);
    bn_out = b.dtype();
    const Tensor out = fc->forward(relu(b).flatten(1));
    fc_out = out.dtype();
    return out;
  }
  Tensor training_step(const data::Example& batch, int64_t) override {
    input_dtype = batch.input.dtype();
    const Tensor logits = precision_forward(batch.input);
    logits_dtype = logits.dtype();
    return cross_entropy(logits, batch.target);
  }
  OptimizerConfig configure_optimizers() override {
    OptimizerConfig c;
    c.optimizer = std::make_shared<optim::AdamW>(parameters(), optim::adamw_defaults());
    return c;
  }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Linear> fc;
  DType input_dtype, conv_out, bn_out, fc_out, logits_dtype;
};

data::DataLoader image_loader() {
  Generator gen(11);
  auto ds = std::make_shared<data::TensorDataset>(randn({32, 1, 6, 6}, kFloat32, &gen),
                                                  randint(0, 3, {32}, kInt64, &gen));
  return data::DataLoader(ds, 8, /*shuffle=*/false);
}

struct LevelRun {
  std::unique_ptr<Trainer> trainer;
  ConvBnModule module;
};

void fit_level(LevelRun& run, const std::string& level,
               std::map<std::string, std::string> extra = {}) {
  TrainerOptions o = quiet_options("16-mixed");
  o.amp_backend = "apex";
  o.amp_level = level;
  o.precision_options = std::move(extra);
  o.max_steps = 3;
  o.seed = 1;
  run.trainer = std::make_unique<Trainer>(o);
  const data::DataLoader loader = image_loader();
  run.trainer->fit(run.module, loader);
}

ApexAmpPrecision& plugin_of(LevelRun& run) {
  auto* p = dynamic_cast<ApexAmpPrecision*>(&run.trainer->precision_plugin());
  EXPECT_NE(p, nullptr);
  return *p;
}

TEST(ApexAmpLevels, O0IsPureFp32) {
  LevelRun run;
  fit_level(run, "O0");
  ApexAmpPrecision& p = plugin_of(run);
  EXPECT_EQ(p.precision(), "16-mixed");
  EXPECT_EQ(p.param_dtype(), kFloat32);
  EXPECT_EQ(run.module.conv->weight.dtype(), kFloat32);
  EXPECT_FALSE(p.master_of(run.module.conv->weight).defined());
  EXPECT_EQ(run.module.bn->weight.dtype(), kFloat32);
  EXPECT_EQ(run.module.conv_out, kFloat32);
  EXPECT_EQ(run.module.logits_dtype, kFloat32);
  EXPECT_EQ(p.loss_scale(), 1.0);
  EXPECT_FALSE(p.dynamic_loss_scale());
  EXPECT_EQ(p.scaler(), nullptr);
}

TEST(ApexAmpLevels, O1IsAutocastWithDynamicScaling) {
  LevelRun run;
  fit_level(run, "O1");
  ApexAmpPrecision& p = plugin_of(run);
  EXPECT_EQ(run.module.conv->weight.dtype(), kFloat32);
  EXPECT_FALSE(p.master_of(run.module.conv->weight).defined());
  EXPECT_EQ(run.module.bn->weight.dtype(), kFloat32);
  EXPECT_EQ(run.module.input_dtype, kFloat32);
  EXPECT_EQ(run.module.conv_out, kFloat16);  // autocast's lower-precision list
  EXPECT_EQ(run.module.bn_out, kFloat16);    // unlisted under autocast: its input's dtype
  EXPECT_EQ(
      run.module.logits_dtype,
      kFloat16);  // O1 is autocast: no output cast (Apex patches torch functions, not forward)
  ASSERT_NE(p.scaler(), nullptr);  // the native GradScaler: dynamic
  EXPECT_EQ(p.loss_scale(), 65536.0);
}

TEST(ApexAmpLevels, O2HasFp16WeightsFp32MastersAndFp32BatchNorm) {
  LevelRun run;
  fit_level(run, "O2");
  ApexAmpPrecision& p = plugin_of(run);
  ConvBnModule& m = run.module;
  EXPECT_EQ(p.param_dtype(), kFloat16);
  for (const Tensor& w : {m.conv->weight, m.conv->bias, m.fc->weight, m.fc->bias}) {
    EXPECT_EQ(w.dtype(), kFloat16);
    const Tensor master = p.master_of(w);
    ASSERT_TRUE(master.defined());
    EXPECT_EQ(master.dtype(), kFloat32);
    // The weight is its master rounded to nearest, after every step.
    EXPECT_EQ(vals(master.to(kFloat16)), vals(w));
  }
  EXPECT_EQ(m.bn->weight.dtype(), kFloat32);
  EXPECT_EQ(m.bn->bias.dtype(), kFloat32);
  EXPECT_EQ(m.bn->running_mean.dtype(), kFloat32);
  EXPECT_FALSE(p.master_of(m.bn->weight).defined());  // fp32 already: its own master
  EXPECT_EQ(m.input_dtype, kFloat16);
  EXPECT_EQ(m.conv_out, kFloat16);
  EXPECT_EQ(m.bn_out, kFloat16);  // fp16 in, fp16 out, fp32 statistics and affine
  EXPECT_EQ(m.fc_out, kFloat16);
  // amp.initialize's patched forward returns float32 under O2: the loss is computed in fp32.
  EXPECT_EQ(m.logits_dtype, kFloat32);
  EXPECT_TRUE(p.dynamic_loss_scale());
  // fp16 gradients may overflow at 2^16 on the first step (skipped, scale halved).
  EXPECT_EQ(p.loss_scale(), 65536.0 / static_cast<double>(int64_t{1} << p.skipped_steps()));
  // The optimizer stepped the masters: its state is fp32 although the weights are fp16.
  const optim::ParamState* st = run.trainer->optimizer()->state(m.fc->weight);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->step + p.skipped_steps(), 3);
  EXPECT_GE(st->step, 2);
  for (const auto& [name, buf] : st->buffers) EXPECT_EQ(buf.dtype(), kFloat32) << name;
}

TEST(ApexAmpLevels, O3IsPureFp16WithoutScaling) {
  LevelRun run;
  fit_level(run, "O3");
  ApexAmpPrecision& p = plugin_of(run);
  ConvBnModule& m = run.module;
  EXPECT_EQ(m.conv->weight.dtype(), kFloat16);
  EXPECT_FALSE(p.master_of(m.conv->weight).defined());
  EXPECT_EQ(m.bn->weight.dtype(), kFloat16);
  // Running statistics stay fp32 under Module::to (batchnorm.h), also here.
  EXPECT_EQ(m.bn->running_mean.dtype(), kFloat32);
  EXPECT_EQ(m.input_dtype, kFloat16);
  EXPECT_EQ(m.bn_out, kFloat16);
  EXPECT_EQ(m.fc_out, kFloat16);
  EXPECT_EQ(m.logits_dtype, kFloat32);  // O3 casts outputs too
  EXPECT_EQ(p.loss_scale(), 1.0);
  EXPECT_FALSE(p.dynamic_loss_scale());
}

TEST(ApexAmpLevels, OptionsOverrideTheLevelDefaults) {
  LevelRun run;
  fit_level(run, "O3", {{"loss_scale", "128"}, {"keep_batchnorm_fp32", "true"}});
  ApexAmpPrecision& p = plugin_of(run);
  EXPECT_EQ(p.loss_scale(), 128.0);  // static: stays
  EXPECT_FALSE(p.dynamic_loss_scale());
  EXPECT_EQ(run.module.bn->weight.dtype(), kFloat32);
  LevelRun dyn;
  fit_level(dyn, "O3", {{"loss_scale", "dynamic"}, {"master_weights", "true"}});
  EXPECT_TRUE(plugin_of(dyn).dynamic_loss_scale());
  EXPECT_TRUE(plugin_of(dyn).master_of(dyn.module.fc->weight).defined());
  EXPECT_EQ(plugin_of(dyn).state_dict().at("loss_scale").get<double>(),
            plugin_of(dyn).loss_scale());
  EXPECT_LE(plugin_of(dyn).loss_scale(), 65536.0);
}

TEST(ApexAmpLevels, DynamicScaleBacksOffAndSkipsOnOverflow) {
  // A loss of 1e30 overflows fp16 gradients at any scale >= 1: every step is skipped and the
  // scale halves each time; the weights do not move.
  ApexAmpPrecision p({.level = ApexOptLevel::kO2});
  nn::Linear lin(4, 3);
  p.convert_module(lin);
  auto opt = std::make_shared<optim::SGD>(lin.parameters(), 0.1);
  const std::vector<double> before = vals(lin.weight);
  for (int i = 0; i < 3; ++i) {
    auto closure = [&] {
      opt->zero_grad();
      Tensor loss = mul(sum(lin.forward(ones({2, 4}, kFloat16)).to(kFloat32)), 1e30);
      p.backward(p.pre_backward(loss));
      return loss;
    };
    EXPECT_FALSE(p.optimizer_step(*opt, closure, [] {}));
  }
  EXPECT_EQ(p.skipped_steps(), 3);
  EXPECT_EQ(p.loss_scale(), 65536.0 / 8);
  EXPECT_EQ(vals(lin.weight), before);
  EXPECT_EQ(lin.weight.dtype(), kFloat16);
}

TEST(ApexAmpLevels, BackendAndLevelErrorsAreLightnings) {
  EXPECT_TRUE(has(error_of([] {
                    make_precision("16-mixed", {.extra = {{"amp_level", "O2"}}});
                  }),
                  "You have asked for `amp_level='O2'` but it's only supported with "
                  "`amp_backend='apex'`."));
  EXPECT_TRUE(has(error_of([] {
                    make_precision("bf16-mixed", {.extra = {{"amp_backend", "apex"}}});
                  }),
                  "amp_backend='apex', precision='bf16-mixed'"));
  EXPECT_TRUE(
      has(error_of([] {
            make_precision("16-mixed", {.extra = {{"amp_backend", "apex"}, {"amp_level", "02"}}});
          }),
          "the letter O, not zero"));
  EXPECT_TRUE(has(error_of([] {
                    make_precision("16-mixed", {.extra = {{"amp_backend", "cuda"}}});
                  }),
                  "amp_backend must be 'native' or 'apex'"));
  EXPECT_TRUE(has(error_of([] {
                    make_precision("16-mixed", {.extra = {{"amp_backend", "apex"},
                                                          {"amp_level", "O2"},
                                                          {"loss_scale", "-1"}}});
                  }),
                  "loss_scale must be 'dynamic' or a positive number"));
  // The native backend is the registry's plugin, whatever it is called.
  EXPECT_EQ(make_precision("16-mixed", {.extra = {{"amp_backend", "native"}}})->class_name(),
            "MixedPrecision");
}

TEST(ApexAmpLevels, ChoosingApexWarnsThatNativeIsRecommended) {
  EXPECT_TRUE(has(apex_deprecation_warning(), "the native backend is recommended"));
  auto p = make_precision("16-mixed", {.extra = {{"amp_backend", "apex"}}});
  EXPECT_EQ(dynamic_cast<ApexAmpPrecision&>(*p).level(), ApexOptLevel::kO2);  // Lightning's default
}

}  // namespace
}  // namespace mantissa::train
