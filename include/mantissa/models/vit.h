#pragma once
// A small Vision Transformer for 28x28 grey images (Fashion-MNIST): non-overlapping patches
// embedded by a Linear layer, a learned position embedding (and class token), pre-LayerNorm
// transformer blocks, a final LayerNorm and a linear classifier on the class token or on the
// mean of the patch tokens. No convolution is needed: patches come from reshape/permute.
#include <memory>
#include <string>
#include <vector>

#include "mantissa/nn/linear.h"
#include "mantissa/nn/transformer.h"

namespace mantissa::models {

struct ViTConfig {
  int64_t image_size = 28;
  int64_t channels = 1;
  int64_t patch = 7;  // must divide image_size (4 or 7 for 28)
  int64_t width = 128;
  int64_t depth = 4;
  int64_t heads = 4;
  double mlp_ratio = 2.0;
  double dropout = 0.0;
  std::string pool = "cls";  // "cls" or "mean"
  int64_t num_classes = 10;
  DType dtype = kFloat32;
  // Training forwards run each block under nn::checkpoint, as GPTConfig's.
  bool activation_checkpointing = false;
};

class ViT : public nn::Module {
 public:
  // Draws from the default generator (see manual_seed): patch/head Linear layers as
  // PyTorch, class token and position embedding ~ N(0, 0.02).
  explicit ViT(const ViTConfig& config);
  // images (N, C*H*W) as the Fashion-MNIST loader gives them, or (N, C, H, W) -> logits
  // (N, num_classes).
  Tensor forward(const Tensor& images) override;
  // images -> (N, grid*grid, C*patch*patch): patch k (row-major over the grid) flattened as
  // (channel, row, column).
  Tensor patchify(const Tensor& images) const;
  const ViTConfig& config() const { return config_; }

  // The modules in the slots "patch_embed", "blocks<i>", "norm" and "head". forward calls
  // whatever a slot holds (see nn/replace.h); these typed accessors throw once a slot holds a
  // replacement of another type.
  std::shared_ptr<nn::Linear> patch_embed() const { return child_as<nn::Linear>("patch_embed"); }
  std::shared_ptr<nn::TransformerBlock> block(int64_t i) const;
  std::shared_ptr<nn::LayerNorm> norm() const { return child_as<nn::LayerNorm>("norm"); }
  std::shared_ptr<nn::Linear> head() const { return child_as<nn::Linear>("head"); }

  Tensor cls_token;  // (1, 1, width); undefined for mean pooling
  Tensor pos_embed;  // (1, tokens, width)

 private:
  static std::string block_name(int64_t i) { return "blocks" + std::to_string(i); }

  ViTConfig config_;
  int64_t grid_;
};

}  // namespace mantissa::models
