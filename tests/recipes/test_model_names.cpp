// --model names: a near miss ("MLP", "mpl") is an error that names the model meant and lists the
// valid ones (it listed them alone: "unknown model 'MLP'; valid values are: ...").
#include "mantissa/recipes/model_names.h"

#include <gtest/gtest.h>

#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::error_of;

TEST(ModelNames, ValidNamesPass) {
  for (const std::string& name : model_names()) EXPECT_NO_THROW(check_model_name(name, "train"));
  EXPECT_EQ(model_names(), (std::vector<std::string>{"mlp", "cnn", "vit", "gpt"}));
}

TEST(ModelNames, NearMissNamesTheModelMeant) {
  EXPECT_EQ(error_of([] { check_model_name("MLP", "train"); }),
            "[train] unknown model 'MLP' (did you mean 'mlp'?); valid values are: mlp, cnn, vit, "
            "gpt");
  EXPECT_EQ(error_of([] { check_model_name("mpl", "bench"); }),
            "[bench] unknown model 'mpl' (did you mean 'mlp'?); valid values are: mlp, cnn, vit, "
            "gpt");
  EXPECT_EQ(error_of([] { check_model_name("Gpt", "plan"); }),
            "[plan] unknown model 'Gpt' (did you mean 'gpt'?); valid values are: mlp, cnn, vit, "
            "gpt");
  // Nothing close: no guess.
  EXPECT_EQ(error_of([] { check_model_name("transformer", "train"); }),
            "[train] unknown model 'transformer'; valid values are: mlp, cnn, vit, gpt");
}

TEST(ModelNames, TheHintIsAModelOfTheCommand) {
  const std::vector<std::string> image_models = {"mlp", "cnn", "vit"};
  EXPECT_EQ(error_of([&] { check_model_name("CNN", "compare", image_models); }),
            "[compare] unknown model 'CNN' (did you mean 'cnn'?); valid values are: mlp, cnn, vit");
  // "GPT" means gpt, which compare does not train: no hint that points elsewhere.
  EXPECT_EQ(error_of([&] { check_model_name("GPT", "compare", image_models); }),
            "[compare] unknown model 'GPT'; valid values are: mlp, cnn, vit");
}

TEST(ModelNames, AVitPatchMustDivideTheImage) {
  EXPECT_NO_THROW(check_vit_patch(4, "train"));
  EXPECT_NO_THROW(check_vit_patch(7, "plan"));
  EXPECT_EQ(error_of([] { check_vit_patch(-7, "train"); }),
            "[train] --patch must divide the image size 28 (4 or 7 make 49 or 16 patches), got -7");
  EXPECT_EQ(error_of([] { check_vit_patch(5, "plan"); }),
            "[plan] --patch must divide the image size 28 (4 or 7 make 49 or 16 patches), got 5");
}

}  // namespace
}  // namespace mantissa::recipes
