// Precision plugins (docs/trainer.md): normalisation and aliases, selection, the hooks and
// Lightning's error texts.
#include <gtest/gtest.h>

#include "mantissa/core/cuda.h"

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/nn/linear.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/optim/sgd.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/double_precision.h"
#include "mantissa/train/precisions/half_precision.h"
#include "mantissa/train/precisions/mixed_precision.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(PrecisionFactory, CanonicalNamesSelectTheirPlugin) {
  EXPECT_EQ(precision_plugin_from_string("32-true")->class_name(), "Precision");
  EXPECT_EQ(precision_plugin_from_string("64-true")->class_name(), "DoublePrecision");
  EXPECT_EQ(precision_plugin_from_string("16-true")->class_name(), "HalfPrecision");
  EXPECT_EQ(precision_plugin_from_string("bf16-true")->param_dtype(), kBFloat16);
  EXPECT_EQ(precision_plugin_from_string("16-true")->param_dtype(), kFloat16);
  auto fp16 = precision_plugin_from_string("16-mixed");
  EXPECT_EQ(fp16->class_name(), "MixedPrecision");
  ASSERT_NE(fp16->scaler(), nullptr);  // 16-mixed runs on the CPU with a loss scaler
  EXPECT_EQ(fp16->scaler()->get_scale(), 65536.0);
  EXPECT_EQ(precision_plugin_from_string("bf16-mixed")->scaler(), nullptr);
  EXPECT_EQ(precision_plugin_from_string("bf16-mixed", "auto")->param_dtype(), kFloat32);
}

TEST(PrecisionFactory, LegacyAliasesMapAndWarnForHalfOnes) {
  forget_warnings_said_once();  // an earlier test may have used the aliases (said once a process)
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(normalize_precision("32"), "32-true");
  EXPECT_EQ(normalize_precision("64"), "64-true");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // silent, as Lightning
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(normalize_precision("16"), "16-mixed");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(err, "historical reasons") && has(err, "'16-mixed'")) << err;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(precision_plugin_from_string("bf16")->precision(), "bf16-mixed");
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(err, "use 'bf16-mixed'")) << err;
}

TEST(PrecisionFactory, UnknownValuesListEveryValidValue) {
  for (const char* bad : {"invalid", "12", "1", "16.0", "fp32", ""}) {
    const std::string msg = error_of([&] { normalize_precision(bad); });
    EXPECT_TRUE(has(msg,
                    "valid values are: 32-true, 64-true, 16-mixed, bf16-mixed, 16-true, "
                    "bf16-true"))
        << bad << ": " << msg;
    EXPECT_TRUE(has(msg, "legacy aliases: 16, 32, 64, bf16")) << msg;
    EXPECT_TRUE(has(msg, "transformer-engine")) << msg;
  }
}

// A misspelt name or a common other name gets one suggestion; an empty planned list is not
// printed ("recognised but not implemented yet: )" read as an error in the message).
TEST(PrecisionFactory, UnknownValuesSuggestTheNearestName) {
  const std::pair<const char*, const char*> cases[] = {
      {"BF16-MIXED", "bf16-mixed"}, {"transformer_engine", "transformer-engine"},
      {"16mixed", "16-mixed"},      {"fp8", "transformer-engine"},
      {"nf4dq", "nf4-dq"},          {"float16", "16-mixed"},
      {"Float64", "64-true"},       {"bfloat16", "bf16-mixed"},
      {"single", "32-true"}};
  for (const auto& [bad, want] : cases) {
    const std::string msg = error_of([&] { normalize_precision(bad); });
    EXPECT_TRUE(has(msg, fmt::format("unknown precision '{}' (did you mean '{}'?)", bad, want)))
        << msg;
  }
  for (const char* far : {"xyz", "invalid", ""}) {
    const std::string msg = error_of([&] { normalize_precision(far); });
    EXPECT_FALSE(has(msg, "did you mean")) << far << ": " << msg;
    EXPECT_FALSE(has(msg, "not implemented yet")) << msg;
  }
}

TEST(PrecisionFactory, PlannedPrecisionsAreRecognisedButNotImplemented) {
  // Every name Lightning knows is implemented now; a planned entry (no factory) is still
  // recognised and refused.
  EXPECT_TRUE(planned_precisions().empty());
  register_precision({.name = "test-planned",
                      .description = "a precision registered before its plugin exists",
                      .make = nullptr,
                      .implemented = false});
  EXPECT_EQ(planned_precisions(), std::vector<std::string>{"test-planned"});
  const std::string msg = error_of([] { precision_plugin_from_string("test-planned"); });
  unregister_precision("test-planned");
  EXPECT_TRUE(has(msg, "'test-planned' is recognised but not implemented yet")) << msg;
}

TEST(PrecisionFactory, GpuAcceleratorsAreAClearErrorWithoutAGpu) {
  EXPECT_TRUE(
      has(error_of([] { check_accelerator("fpga"); }), "valid values are: cpu, gpu, cuda, auto"));
  EXPECT_TRUE(has(error_of([] { check_accelerator("tpu"); }), "no tpu backend"));
  if (cuda::is_available()) GTEST_SKIP() << "a GPU can be used here";
  for (const char* acc : {"gpu", "cuda"}) {
    const std::string msg = error_of([acc] { precision_plugin_from_string("32-true", acc); });
    EXPECT_TRUE(has(msg, fmt::format("cannot run on accelerator '{}'", acc))) << msg;
    EXPECT_TRUE(has(error_of([acc] { check_accelerator(acc); }), cuda::unavailable_reason()));
  }
  EXPECT_EQ(resolve_accelerator("auto"), "cpu");
}

TEST(MixedPrecisionPlugin, Bf16WithAScalerIsAnError) {
  const std::string msg =
      error_of([] { MixedPrecision p("bf16-mixed", std::make_unique<amp::GradScaler>()); });
  EXPECT_TRUE(has(msg, "`precision='bf16-mixed'` does not use a scaler, found")) << msg;
  EXPECT_TRUE(has(error_of([] { MixedPrecision p("16"); }),
                  "Passed `MixedPrecision(precision='16')`. Precision must be '16-mixed' or "
                  "'bf16-mixed'."));
  EXPECT_TRUE(has(error_of([] { HalfPrecision p("16-mixed"); }), "'16-true' or 'bf16-true'"));
}

TEST(MixedPrecisionPlugin, UsesAGivenScalerAndScalesTheLoss) {
  auto scaler = std::make_unique<amp::GradScaler>(amp::GradScalerOptions{.init_scale = 8.0});
  MixedPrecision p("16-mixed", std::move(scaler));
  const Tensor scaled = p.pre_backward(scalar_tensor(1.5));
  EXPECT_EQ(scaled.item(), 12.0);
  EXPECT_EQ(p.state_dict()["scale"], 8.0);
  MixedPrecision bf16("bf16-mixed");
  EXPECT_EQ(bf16.pre_backward(scalar_tensor(1.5)).item(), 1.5);
  EXPECT_TRUE(bf16.state_dict().empty());
}

TEST(HalfPrecisionPlugin, ConvertsModulesInputsAndInitScopes) {
  HalfPrecision p("bf16-true");
  nn::Linear layer(4, 3);
  p.convert_module(layer);
  EXPECT_EQ(layer.weight.dtype(), kBFloat16);
  data::Example batch{ones({2, 4}), zeros({2}, kInt64)};
  const data::Example converted = p.convert_input(batch);
  EXPECT_EQ(converted.input.dtype(), kBFloat16);
  EXPECT_EQ(converted.target.dtype(), kInt64);  // labels stay integers
  {
    ScopePtr scope = p.module_init_context();
    EXPECT_EQ(get_default_dtype(), kBFloat16);
    nn::Linear born(2, 2);
    EXPECT_EQ(born.weight.dtype(), kBFloat16);
  }
  EXPECT_EQ(get_default_dtype(), kFloat32);
  DoublePrecision d;
  EXPECT_EQ(d.convert_input(batch).input.dtype(), kFloat64);
  ScopePtr scope = d.forward_context();
  EXPECT_EQ(get_default_dtype(), kFloat64);
}

// An optimizer that claims to unscale internally (as PyTorch's fused optimizers do).
class FusedLikeSGD : public optim::SGD {
 public:
  using optim::SGD::SGD;
  bool step_supports_amp_scaling() const override { return true; }
};

TEST(MixedPrecisionPlugin, ClippingWithAnInternallyUnscalingOptimizerIsLightningsError) {
  Tensor w = ones({3});
  w.requires_grad_();
  FusedLikeSGD opt({w}, 0.1);
  MixedPrecision fp16("16-mixed");
  const std::string msg =
      error_of([&] { fp16.clip_gradients(opt, 1.0, GradClipAlgorithm::kNorm); });
  EXPECT_TRUE(has(msg,
                  "The current optimizer, SGD, does not allow for gradient clipping because "
                  "it performs unscaling of gradients internally. HINT: Are you using a "
                  "'fused' optimizer?"))
      << msg;
  // No clipping requested, or no scaler (bf16-mixed, fixed upstream in #21435): no error.
  EXPECT_NO_THROW(fp16.clip_gradients(opt, 0.0, GradClipAlgorithm::kNorm));
  MixedPrecision bf16("bf16-mixed");
  EXPECT_NO_THROW(bf16.clip_gradients(opt, 1.0, GradClipAlgorithm::kNorm));
}

TEST(PrecisionPlugin, ClipsByNormAndByValue) {
  Tensor w = zeros({2});
  w.requires_grad_();
  optim::SGD opt({w}, 0.1);
  Precision p;
  w.set_grad(tensor<float>({3.0f, 4.0f}, {2}));
  p.clip_gradients(opt, 1.0, GradClipAlgorithm::kNorm);  // norm 5 -> 1
  EXPECT_NEAR(w.grad().to_vector<float>()[0], 0.6, 1e-6);
  EXPECT_NEAR(w.grad().to_vector<float>()[1], 0.8, 1e-6);
  w.set_grad(tensor<float>({3.0f, -4.0f}, {2}));
  p.clip_gradients(opt, 0.5, GradClipAlgorithm::kValue);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0.5f, -0.5f}));
  p.clip_gradients(opt, 0.0, GradClipAlgorithm::kValue);  // no-op
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0.5f, -0.5f}));
  EXPECT_TRUE(has(error_of([] { grad_clip_algorithm_from_string("l1"); }), "'value', 'norm'"));
}

}  // namespace
}  // namespace mantissa::train
