// The --optimizer names (src/optim/optimizer_factory.cpp): the valid ones pass, an unknown one
// is an error listing them, with the nearest name for a near miss.
#include <gtest/gtest.h>

#include "mantissa/core/warning.h"
#include "mantissa/nn/linear.h"
#include "mantissa/optim/optimizer_factory.h"
#include "support/test_util.h"

namespace mantissa::optim {
namespace {

using mantissa::testing::expect_error;

TEST(OptimizerFactory, ValidNamesPass) {
  for (const char* name : {"adamw", "adam", "sgd", "adamw8bit", "adam8bit"})
    EXPECT_NO_THROW(check_optimizer_name(name)) << name;
}

TEST(OptimizerFactory, NearMissesGetTheirNearestName) {
  expect_error([] { check_optimizer_name("adamw8"); },
               {"unknown --optimizer 'adamw8' (did you mean 'adamw8bit'?)",
                "valid values are: adamw, adam, sgd, adamw8bit, adam8bit"});
  expect_error([] { check_optimizer_name("AdamW"); }, "(did you mean 'adamw'?)");
  expect_error([] { check_optimizer_name("sgdd"); }, "(did you mean 'sgd'?)");
  // Far from every name: the list only.
  try {
    check_optimizer_name("lion");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("valid values are"), std::string::npos) << e.what();
  }
}

// An 8-bit optimizer over tensors that are all below min_8bit_size (4096 elements) keeps every
// state 32-bit: it says so, once, instead of training with the 32-bit optimizer's memory in
// silence. A model with one large enough tensor says nothing.
TEST(OptimizerFactory, EightBitOptimizerWithOnlySmallTensorsWarns) {
  forget_warnings_said_once();
  nn::Linear small(64, 32);  // 2048 + 32 elements
  {
    const WarningRecorder said;
    auto opt = make_optimizer({.name = "adamw8bit"}, small);
    ASSERT_EQ(said.messages().size(), 1u);
    const std::string m = said.messages()[0];
    EXPECT_NE(m.find("--optimizer adamw8bit: none of the 2 trainable parameter tensors gets "
                     "8-bit state (the largest has 2048 elements; 8-bit state needs at least "
                     "4096)"),
              std::string::npos)
        << m;
    EXPECT_EQ(opt->state_bytes(), 0);  // nothing stepped yet
  }
  nn::Linear large(128, 64);  // 8192 elements: 8-bit
  forget_warnings_said_once();
  const WarningRecorder said;
  make_optimizer({.name = "adam8bit"}, large);
  EXPECT_TRUE(said.messages().empty());
  // --optim-bits-32 keeping the one large tensor 32-bit: said too, with the reason.
  make_optimizer({.name = "adam8bit", .optim_bits_32 = {"weight"}}, large);
  ASSERT_EQ(said.messages().size(), 1u);
  EXPECT_NE(said.messages()[0].find("none of the 2 trainable parameter tensors gets 8-bit state "
                                    "(1 kept 32-bit by --optim-bits-32 or the embeddings rule, "
                                    "the others below 4096 elements, the largest 64)"),
            std::string::npos)
      << said.messages()[0];
}

// A name of --optim-bits-32 that matches no parameter: the error names the flag (it named the
// library function, override_optim_bits) with the closest names.
TEST(OptimizerFactory, OptimBits32TypoNamesTheFlag) {
  nn::Linear large(128, 64);
  expect_error([&] { make_optimizer({.name = "adamw8bit", .optim_bits_32 = {"wieght"}}, large); },
               {"[optimizer] --optim-bits-32: no parameter name contains 'wieght'; closest names: "
                "weight, bias"});
}

}  // namespace
}  // namespace mantissa::optim
