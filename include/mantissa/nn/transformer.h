#pragma once
// Building blocks of a pre-LayerNorm transformer (GPT-2 / ViT style).
#include <optional>
#include "mantissa/core/generator.h"
#include "mantissa/nn/attention.h"
#include "mantissa/nn/dropout.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/normalization.h"

namespace mantissa::nn {

// Linear(E, hidden) -> GELU -> Linear(hidden, E) -> Dropout.
class TransformerMLP : public Module {
 public:
  TransformerMLP(int64_t embed_dim, int64_t hidden_dim, double dropout = 0.0,
                 std::string approximate = "none", std::optional<DType> dtype = std::nullopt,
                 Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

  // The modules in the "fc1", "fc2" and "drop" slots. forward calls whatever module a slot
  // holds; these typed accessors throw once a slot holds a replacement of another type.
  std::shared_ptr<Linear> fc1() const { return child_as<Linear>("fc1"); }
  std::shared_ptr<Linear> fc2() const { return child_as<Linear>("fc2"); }
  std::shared_ptr<Dropout> drop() const { return child_as<Dropout>("drop"); }

 private:
  std::string approximate_;
};

struct TransformerBlockOptions {
  int64_t embed_dim = 128;
  int64_t num_heads = 4;
  double mlp_ratio = 4.0;
  double dropout = 0.0;  // on attention weights, after attention and after the MLP
  bool causal = false;
  std::string gelu_approximate = "none";
  std::optional<DType> dtype;  // unset: the default dtype (see core/default_dtype.h)
  Generator* gen = nullptr;    // dropout masks (and nothing else)
  // The attention's input projection as a Linear child "attn.in_proj" (see
  // MultiheadAttention's in_proj_linear) instead of PyTorch's in_proj_weight parameters.
  bool in_proj_linear = false;
};

// x + drop(attn(ln1(x))), then x + mlp(ln2(x)).
class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerBlockOptions& options);
  // Calls the modules now in the slots; the "attn" slot must hold a MultiheadAttention (or a
  // subclass), since the block passes it the causal flag.
  Tensor forward(const Tensor& x) override;
  // forward for incremental decoding of a causal block: attention through
  // MultiheadAttention::forward_cached with this block's keys and values (see there).
  Tensor forward_cached(const Tensor& x, KvBuffer& keys, KvBuffer& values);
  bool causal() const { return causal_; }

  // The modules in the "ln1", "attn", "attn_drop", "ln2" and "mlp" slots (typed accessors
  // throw once a slot holds a replacement of another type).
  std::shared_ptr<LayerNorm> ln1() const { return child_as<LayerNorm>("ln1"); }
  std::shared_ptr<LayerNorm> ln2() const { return child_as<LayerNorm>("ln2"); }
  std::shared_ptr<MultiheadAttention> attn() const { return child_as<MultiheadAttention>("attn"); }
  std::shared_ptr<Dropout> attn_drop() const { return child_as<Dropout>("attn_drop"); }
  std::shared_ptr<TransformerMLP> mlp() const { return child_as<TransformerMLP>("mlp"); }

 private:
  bool causal_;
};

}  // namespace mantissa::nn
