// Complex models in the Trainer: parameters are complex128 under 64-true's init_module() and
// complex64 under 32-true, the example model trains (its loss falls), and every
// low-precision plugin refuses complex parameters with an error that says what to use.
#include <gtest/gtest.h>

#include "../../examples/complex_regression.h"
#include "mantissa/nn/complex_linear.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

TEST(ComplexTraining, InitModuleGivesComplex128Under64TrueAndComplex64Under32True) {
  {
    TrainerOptions o;
    o.precision = "64-true";
    Trainer trainer(o);
    auto scope = trainer.init_module();
    nn::ComplexLinear layer(3, 2);
    EXPECT_EQ(layer.weight.dtype(), kComplex128);
    EXPECT_EQ(layer.bias.dtype(), kComplex128);
  }
  {
    Trainer trainer(TrainerOptions{});  // 32-true
    auto scope = trainer.init_module();
    nn::ComplexLinear layer(3, 2);
    EXPECT_EQ(layer.weight.dtype(), kComplex64);
  }
  nn::ComplexLinear outside(3, 2);  // no scope: float32 default
  EXPECT_EQ(outside.weight.dtype(), kComplex64);
}

TEST(ComplexTraining, ExampleModelTrainsIn64TrueAnd32True) {
  for (const char* precision : {"64-true", "32-true"}) {
    DType dtype;
    const std::vector<double> losses = complex_example::train(precision, 120, &dtype);
    ASSERT_EQ(losses.size(), 120u) << precision;
    EXPECT_EQ(dtype, std::string(precision) == "64-true" ? kComplex128 : kComplex64);
    EXPECT_LT(losses.back(), 0.05 * losses.front())
        << precision << ": loss " << losses.front() << " -> " << losses.back();
  }
}

TEST(ComplexTraining, LowPrecisionPluginsRefuseComplexParameters) {
  auto fit_error = [](const char* precision) {
    TrainerOptions o;
    o.precision = precision;
    o.max_steps = 1;
    o.enable_checkpointing = false;
    o.enable_progress_bar = false;
    Trainer trainer(o);
    complex_example::ComplexRegression module;
    data::DataLoader loader(complex_example::make_dataset(), 16);
    return mantissa::testing::error_of([&] { trainer.fit(module, loader); });
  };
  // Plugins that keep an fp32 default while the model is built: the Trainer's check names
  // the first complex parameter.
  for (const char* precision : {"16-mixed", "bf16-mixed", "nf4"}) {
    const std::string msg = fit_error(precision);
    for (const std::string piece :
         {std::string("precision '") + precision + "'",
          std::string("does not support complex parameters"),
          std::string("'fc.weight' is complex64"), std::string("'64-true'")})
      EXPECT_NE(msg.find(piece), std::string::npos) << precision << ": " << msg;
  }
  // The true half precisions and FP8 (Transformer Engine) build the model under a
  // float16/bfloat16 default, which has no complex counterpart: the layer's constructor
  // already says so.
  for (const char* precision : {"16-true", "bf16-true", "transformer-engine"}) {
    const std::string msg = fit_error(precision);
    for (const char* piece : {"no complex dtype", "32-true (complex64)", "64-true (complex128)"})
      EXPECT_NE(msg.find(piece), std::string::npos) << precision << ": " << msg;
  }
}

}  // namespace
}  // namespace mantissa::train
