// nn::save_model / load_model: a module's state_dict through one safetensors file, as
// safetensors.torch.save_model / load_model.
#include "mantissa/nn/model_file.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "mantissa/core/generator.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/sequential.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

std::shared_ptr<nn::Sequential> mlp(int64_t hidden) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, hidden), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(hidden, 2)});
}

TEST(ModelFile, RoundTripsTheStateDictWithItsMetadata) {
  manual_seed(1);
  auto saved = mlp(3);
  manual_seed(2);
  auto loaded = mlp(3);
  const testing::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  nn::save_model(*saved, path, {{"epoch", "3"}});

  const io::SafetensorsHeader h = io::read_safetensors_header(path);
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors[0].name, "0.weight");
  EXPECT_EQ(h.tensors[0].shape, (Shape{3, 4}));
  EXPECT_EQ(h.tensors[0].dtype, kFloat32);
  EXPECT_EQ(h.metadata.at("epoch"), "3");

  ASSERT_NE(loaded->state_dict().at("0.weight").to_vector<float>(),
            saved->state_dict().at("0.weight").to_vector<float>());
  const nn::LoadResult r = nn::load_model(*loaded, path);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  for (const auto& [name, t] : saved->state_dict())
    EXPECT_EQ(loaded->state_dict().at(name).to_vector<float>(), t.to_vector<float>()) << name;
}

// Strict loading refuses another architecture by key and changes nothing; strict = false loads
// what matches and returns the rest.
TEST(ModelFile, StrictLoadRefusesAnotherShapeAndChangesNothing) {
  manual_seed(1);
  auto small = mlp(3);
  const testing::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  nn::save_model(*small, path);

  manual_seed(2);
  auto wide = mlp(5);
  const std::vector<float> before = wide->state_dict().at("0.weight").to_vector<float>();
  const std::string e = testing::error_of([&] { nn::load_model(*wide, path); });
  EXPECT_NE(e.find("0.weight"), std::string::npos) << e;
  EXPECT_EQ(wide->state_dict().at("0.weight").to_vector<float>(), before);

  auto head_only = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(4, 3)});
  const nn::LoadResult r = nn::load_model(*head_only, path, /*strict=*/false);
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_EQ(head_only->state_dict().at("0.bias").to_vector<float>(),
            small->state_dict().at("0.bias").to_vector<float>());
  EXPECT_NE(testing::error_of([&] { nn::load_model(*head_only, path + ".missing"); }), "");
}

}  // namespace
}  // namespace mantissa
