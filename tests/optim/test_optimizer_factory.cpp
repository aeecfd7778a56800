// The --optimizer names (src/optim/optimizer_factory.cpp): the valid ones pass, an unknown one
// is an error listing them, with the nearest name for a near miss.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mantissa::optim
