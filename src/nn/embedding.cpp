#include "mantissa/nn/embedding.h"
#include "mantissa/core/default_dtype.h"

#include "mantissa/nn/init.h"
#include "mantissa/ops/embedding.h"

namespace mantissa::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<DType> requested_dtype, Generator* gen, double init_std)
    : Module("Embedding") {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  MANTISSA_CHECK(num_embeddings > 0 && embedding_dim > 0, "Embedding",
                 "sizes must be positive, got num_embeddings={} embedding_dim={}", num_embeddings,
                 embedding_dim);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}, dtype));
  init::normal_(weight, 0.0, init_std, gen);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string Embedding::extra_repr() const {
  return fmt::format("{}, {}", weight.size(0), weight.size(1));
}

}  // namespace mantissa::nn
