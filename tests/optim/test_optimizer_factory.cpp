// The --optimizer names (src/optim/optimizer_factory.cpp): the valid ones pass, an unknown one
// is an error listing them, with the nearest name for a near miss; an 8-bit optimizer that
// would keep no less state than the plain one says so with both sizes.
#include <gtest/gtest.h>

#include "mantissa/core/generator.h"
#include "mantissa/core/warning.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/reduce.h"
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

// The MLP of `mantissa train --model mlp --precision bf16-true --lora-rank 8`: 784 -> 256 -> 10
// in bfloat16 with LoRA adapters of rank 8, so 10714 trainable elements in 6 tensors, of which
// only the first lora_A (6272) reaches 4096.
std::shared_ptr<nn::Sequential> bf16_lora_mlp() {
  manual_seed(1);
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10)});
  nn::apply_lora(*net, {.r = 8, .alpha = 16});
  net->to(kBFloat16);  // as bf16-true's convert_module: the adapters too
  return net;
}

// One step, so every trainable tensor has its state and state_bytes() counts it.
int64_t state_bytes_after_a_step(Optimizer& opt, nn::Module& net) {
  manual_seed(2);
  sum(net.forward(randn({4, 784}, kBFloat16))).backward();
  opt.step();
  return opt.state_bytes();
}

// The 8-bit optimizer keeping more state than the plain one: its tensors below 4096 elements
// keep fp32 moments (8 bytes) where AdamW keeps bfloat16 ones (4 bytes). It warns also when some
// tensors are 8-bit: this run (one 8-bit tensor) keeps 4.51 bytes per parameter against adamw's
// 4.00. The warning's numbers are what state_bytes() reports.
TEST(OptimizerFactory, EightBitOptimizerKeepingMoreThanThePlainOneWarns) {
  forget_warnings_said_once();
  auto net = bf16_lora_mlp();
  const WarningRecorder said;
  auto eight_bit = make_optimizer({.name = "adamw8bit"}, *net);
  ASSERT_EQ(said.messages().size(), 1u);
  const std::string m = said.messages()[0];
  for (const char* part :
       {"--optimizer adamw8bit: 1 of the 6 trainable parameter tensors gets 8-bit state (6272 "
        "of 10714 elements); the other 5 keep fp32 moments (the largest has 2048 elements; "
        "8-bit state needs at least 4096): its state is 4.51 bytes per parameter, more than "
        "--optimizer adamw's 4.00 (moments in the parameters' half dtype); use --optimizer "
        "adamw (8-bit state saves on tensors of at least 4096 elements; ",
        "below it here: 0.base_layer.bias (256 elements), 0.lora_B.weight (2048 elements), "
        "2.base_layer.bias (10 elements), 2.lora_A.weight (2048 elements), ... 1 more)"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  EXPECT_EQ(state_bytes_after_a_step(*eight_bit, *net), 48280);  // 4.51 * 10714
  auto net2 = bf16_lora_mlp();
  auto plain = make_optimizer({.name = "adamw"}, *net2);
  EXPECT_EQ(state_bytes_after_a_step(*plain, *net2), 42856);  // 4.00 * 10714
  EXPECT_EQ(said.messages().size(), 1u);                      // the plain optimizer says nothing

  // Master weights: fp32 moments and a master copy under both, so the 8-bit tensor saves.
  make_optimizer({.name = "adamw8bit", .master_weights = true}, *net);
  EXPECT_EQ(said.messages().size(), 1u);
  // fp32_state: AdamW's moments are fp32 too, so only the 8-bit tensor decides, and it saves.
  make_optimizer({.name = "adam8bit", .fp32_state = true}, *net);
  EXPECT_EQ(said.messages().size(), 1u);
}

// Where the 8-bit optimizer saves, nothing is said: bf16-true without LoRA on a layer of
// 8192 elements (2.09 bytes per parameter against 4.00), and fp32 parameters with one 8-bit
// tensor however small the others are.
TEST(OptimizerFactory, EightBitOptimizerThatSavesSaysNothing) {
  forget_warnings_said_once();
  const WarningRecorder said;
  nn::Linear bf16(128, 64, true, kBFloat16);
  make_optimizer({.name = "adamw8bit"}, bf16);
  EXPECT_TRUE(said.messages().empty()) << said.messages()[0];
  manual_seed(3);
  nn::Sequential fp32;
  fp32.push_back(std::make_shared<nn::Linear>(784, 8));  // 6272 elements: 8-bit
  fp32.push_back(std::make_shared<nn::Linear>(8, 10));
  make_optimizer({.name = "adamw8bit"}, fp32);
  EXPECT_TRUE(said.messages().empty()) << said.messages()[0];
}

// A small bf16 model whose state is all 32-bit under the 8-bit optimizer: 8 bytes per
// parameter against AdamW's 4 in bf16 (the old text said "no saving"), and against AdamW's 8
// with fp32_state ("no saving").
TEST(OptimizerFactory, EightBitOptimizerWithOnlySmallHalfTensorsComparesWithTheDtype) {
  forget_warnings_said_once();
  nn::Linear small(64, 32, true, kBFloat16);
  const WarningRecorder said;
  make_optimizer({.name = "adamw8bit"}, small);
  ASSERT_EQ(said.messages().size(), 1u);
  EXPECT_NE(said.messages()[0].find(
                "none of the 2 trainable parameter tensors gets 8-bit state (the largest has "
                "2048 elements; 8-bit state needs at least 4096): its state is 8.00 bytes per "
                "parameter, more than --optimizer adamw's 4.00 (moments in the parameters' half "
                "dtype); use --optimizer adamw"),
            std::string::npos)
      << said.messages()[0];
  make_optimizer({.name = "adam8bit", .fp32_state = true}, small);
  ASSERT_EQ(said.messages().size(), 2u);
  EXPECT_NE(said.messages()[1].find("its state is 8.00 bytes per parameter, no saving over "
                                    "--optimizer adam's 8.00 (fp32 moments); use --optimizer adam"),
            std::string::npos)
      << said.messages()[1];
  make_optimizer({.name = "adam8bit", .master_weights = true}, small);
  ASSERT_EQ(said.messages().size(), 3u);
  EXPECT_NE(said.messages()[2].find("its state is 12.00 bytes per parameter, no saving over "
                                    "--optimizer adam's 12.00 (fp32 moments, fp32 master "
                                    "weights included in both)"),
            std::string::npos)
      << said.messages()[2];
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
