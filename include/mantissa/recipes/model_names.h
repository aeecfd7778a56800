#pragma once
// The names of the reference models (--model), checked with the likely meant one for a near
// miss ("MLP", "mpl": did you mean 'mlp'?), as misspelt precisions and optimizers are.
#include <cstdint>
#include <string>
#include <vector>

namespace mantissa::recipes {

// Every model a run can train: mlp, cnn, vit, gpt.
const std::vector<std::string>& model_names();

// Throws [where] "unknown model 'MLP' (did you mean 'mlp'?); valid values are: mlp, cnn, vit,
// gpt" unless `model` is one of `valid` (by default every model); the hint only for a near miss
// of a valid model.
void check_model_name(const std::string& model, const std::string& where,
                      const std::vector<std::string>& valid = model_names());

// The side of a Fashion-MNIST image, which a ViT's --patch must divide.
inline constexpr int64_t kFashionImageSize = 28;

// Throws [where] "--patch must divide the image size 28 ..." unless `patch` does.
void check_vit_patch(int64_t patch, const std::string& where);

}  // namespace mantissa::recipes
