#pragma once
// nn::Embedding: a learned table indexed by integer tokens.
#include <optional>
#include "mantissa/core/generator.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

class Embedding : public Module {
 public:
  // weight (num_embeddings, embedding_dim) ~ N(0, init_std^2) (PyTorch: 1; GPT-2: 0.02), drawn
  // from `gen` (default generator when null) and rounded once to `dtype`.
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<DType> dtype = std::nullopt, Generator* gen = nullptr,
            double init_std = 1.0);
  // indices: integer tensor of any shape; returns indices.shape() + [embedding_dim].
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  Tensor weight;
};

}  // namespace mantissa::nn
