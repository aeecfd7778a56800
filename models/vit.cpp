#include "mantissa/models/vit.h"

#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/init.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/shape_ops.h"

namespace mantissa::models {

ViT::ViT(const ViTConfig& c) : Module("ViT"), config_(c) {
  MANTISSA_CHECK(c.patch > 0 && c.image_size % c.patch == 0, "ViT",
                 "patch size {} must divide the image size {}", c.patch, c.image_size);
  MANTISSA_CHECK(c.pool == "cls" || c.pool == "mean", "ViT",
                 "pool must be 'cls' or 'mean', got '{}'", c.pool);
  MANTISSA_CHECK(c.width % c.heads == 0, "ViT", "width {} must be divisible by heads {}", c.width,
                 c.heads);
  grid_ = c.image_size / c.patch;
  const int64_t tokens = grid_ * grid_ + (c.pool == "cls" ? 1 : 0);
  register_module("patch_embed", std::make_shared<nn::Linear>(c.channels * c.patch * c.patch,
                                                              c.width, true, c.dtype));
  if (c.pool == "cls") {
    cls_token = register_parameter("cls_token", empty({1, 1, c.width}, c.dtype));
    nn::init::normal_(cls_token, 0.0, 0.02);
  }
  pos_embed = register_parameter("pos_embed", empty({1, tokens, c.width}, c.dtype));
  nn::init::normal_(pos_embed, 0.0, 0.02);
  for (int64_t i = 0; i < c.depth; ++i) {
    register_module(block_name(i), std::make_shared<nn::TransformerBlock>(
                                       nn::TransformerBlockOptions{.embed_dim = c.width,
                                                                   .num_heads = c.heads,
                                                                   .mlp_ratio = c.mlp_ratio,
                                                                   .dropout = c.dropout,
                                                                   .causal = false,
                                                                   .dtype = c.dtype}));
  }
  register_module("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.width}, 1e-5, true,
                                                          true, c.dtype));
  register_module("head", std::make_shared<nn::Linear>(c.width, c.num_classes, true, c.dtype));
}

std::shared_ptr<nn::TransformerBlock> ViT::block(int64_t i) const {
  MANTISSA_CHECK(i >= 0 && i < config_.depth, "ViT", "block {} is out of range for depth {}", i,
                 config_.depth);
  return child_as<nn::TransformerBlock>(block_name(i));
}

Tensor ViT::patchify(const Tensor& images) const {
  const ViTConfig& c = config_;
  const int64_t pixels = c.channels * c.image_size * c.image_size;
  MANTISSA_CHECK((images.dim() == 2 && images.size(1) == pixels) ||
                     (images.dim() == 4 && images.size(1) == c.channels &&
                      images.size(2) == c.image_size && images.size(3) == c.image_size),
                 "ViT", "expected images (N, {}) or (N, {}, {}, {}), got {}", pixels, c.channels,
                 c.image_size, c.image_size, shape_str(images.shape()));
  const int64_t N = images.size(0), P = c.patch, G = grid_;
  // (N, C, G, P, G, P) -> (N, G, G, C, P, P) -> (N, G*G, C*P*P)
  Tensor patches = images.reshape({N, c.channels, G, P, G, P})
                       .permute({0, 2, 4, 1, 3, 5})
                       .reshape({N, G * G, c.channels * P * P});
  return patches;
}

Tensor ViT::forward(const Tensor& images) {
  const ViTConfig& c = config_;
  const int64_t N = images.size(0);
  Tensor x = child("patch_embed")->forward(patchify(images));
  if (cls_token.defined()) x = cat({cls_token.expand({N, 1, c.width}), x}, 1);
  x = add(x, pos_embed);
  for (int64_t i = 0; i < c.depth; ++i) {
    nn::Module& block = *child(block_name(i));
    x = c.activation_checkpointing ? nn::checkpoint(block, x) : block.forward(x);
  }
  x = child("norm")->forward(x);
  Tensor pooled = c.pool == "cls" ? x.select(1, 0) : mean(x, {1});
  return child("head")->forward(pooled);
}

}  // namespace mantissa::models
