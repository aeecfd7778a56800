// scaled_dot_product_attention: checks, then the fused kernel (ops/attention_fused.h) when it
// covers the call (no explicit mask, no dropout; key and value leading dimensions of size 1
// expanded to the query's), else the composed form: batched matmul,
// where/add masking, softmax and dropout, so autograd through those ops gives the backward. The
// composed form applies the scale to q (L x E values) rather than to the (L x S) scores, the
// cheaper of the two. On a GPU the fused path takes float16 and bfloat16 (tensor-core flash
// kernels); elsewhere without an explicit mask, scale (float16: already on q), causal mask and
// softmax are one kernel (detail::scaled_softmax) and no mask tensor is made.
#include "mantissa/ops/attention.h"
#include "mantissa/core/op_profiler.h"

#include <cmath>
#include <limits>

#include "amp/autocast_dispatch.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/softmax.h"
#include "ops/attention_fused.h"

namespace mantissa {
namespace {

// The (L, S) kBool mask of is_causal: true where key j <= query i.
Tensor causal_mask(int64_t L, int64_t S) {
  Tensor m = empty({L, S}, kBool);
  bool* p = m.data<bool>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) p[i * S + j] = j <= i;
  return m;
}

// t expanded to query's leading dimensions (all but the last two) where t has the same rank
// and each of its leading dimensions equals the query's or is 1; undefined otherwise.
Tensor broadcast_leading(const Tensor& t, const Tensor& query) {
  const int64_t d = query.dim();
  if (t.dim() != d) return Tensor();
  Shape shape = t.shape();
  for (int64_t i = 0; i < d - 2; ++i) {
    if (t.size(i) != query.size(i) && t.size(i) != 1) return Tensor();
    shape[static_cast<size_t>(i)] = query.size(i);
  }
  return t.expand(shape);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  MANTISSA_PROFILE_OP("attention");
  MANTISSA_AUTOCAST("scaled_dot_product_attention", scaled_dot_product_attention, query, key, value,
                    attn_mask, dropout_p, is_causal, scale, gen);
  constexpr const char* kOp = "scaled_dot_product_attention";
  for (const Tensor* t : {&query, &key, &value}) {
    MANTISSA_CHECK(t->is_floating_point() && !t->dtype().is_float8(), kOp,
                   "query, key and value must be floating, got {}", t->dtype().name());
    MANTISSA_CHECK(t->dim() >= 2, kOp, "inputs must be at least 2-D (..., L, E), got shape {}",
                   shape_str(t->shape()));
  }
  MANTISSA_CHECK(query.dtype() == key.dtype() && key.dtype() == value.dtype(), kOp,
                 "query, key and value must share a dtype, got {}, {}, {}", query.dtype().name(),
                 key.dtype().name(), value.dtype().name());
  const int64_t L = query.size(query.dim() - 2), E = query.size(query.dim() - 1);
  const int64_t S = key.size(key.dim() - 2);
  MANTISSA_CHECK(key.size(key.dim() - 1) == E, kOp,
                 "query {} and key {} must have the same embedding size (last dimension)",
                 shape_str(query.shape()), shape_str(key.shape()));
  MANTISSA_CHECK(value.size(value.dim() - 2) == S, kOp,
                 "key {} and value {} must have the same sequence length (dimension -2)",
                 shape_str(key.shape()), shape_str(value.shape()));
  MANTISSA_CHECK(dropout_p >= 0 && dropout_p <= 1, kOp, "dropout_p must be in [0, 1], got {}",
                 dropout_p);
  MANTISSA_CHECK(
      !(is_causal && attn_mask.defined()), kOp,
      "is_causal and attn_mask cannot both be set (fold the causal mask into attn_mask)");
  if (attn_mask.defined()) {
    MANTISSA_CHECK(attn_mask.dtype() == kBool || attn_mask.is_floating_point(), kOp,
                   "attn_mask must be bool or floating, got {}", attn_mask.dtype().name());
    MANTISSA_CHECK(attn_mask.dim() >= 2 && attn_mask.size(attn_mask.dim() - 2) == L &&
                       attn_mask.size(attn_mask.dim() - 1) == S,
                   kOp, "attn_mask of shape {} does not end in (L, S) = ({}, {})",
                   shape_str(attn_mask.shape()), L, S);
  }
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  MANTISSA_CHECK(std::isfinite(sc), kOp, "scale must be finite, got {}", sc);
  if (detail::fused_attention_applies(query, key, value, attn_mask, dropout_p))
    return detail::fused_attention(query, key, value, is_causal, sc);
  // Key and value leading dimensions of size 1 broadcast against the query's (grouped-query
  // attention shares a key/value head among several query heads): the fused kernel takes them
  // expanded to the query's, and expand's backward adds up the sharing heads' gradients.
  const Tensor key_b = broadcast_leading(key, query), value_b = broadcast_leading(value, query);
  if (key_b.defined() && value_b.defined() &&
      detail::fused_attention_applies(query, key_b, value_b, attn_mask, dropout_p))
    return detail::fused_attention(query, key_b, value_b, is_causal, sc);

  if (query.is_cuda() && !attn_mask.defined()) {
    // GPU: the scores, then scale, causal mask (by index) and softmax in one kernel. float16
    // scores would overflow before the scale where the scaled ones do not, so there the scale is
    // applied to q first, as on the CPU.
    const bool scale_q = query.dtype() == kFloat16;
    Tensor weights =
        detail::scaled_softmax(matmul(scale_q ? mul(query, sc) : query, key.transpose(-2, -1)),
                               scale_q ? 1.0 : sc, is_causal);
    if (dropout_p > 0) weights = dropout(weights, dropout_p, /*training=*/true, gen);
    return matmul(weights, value);
  }
  Tensor scores = matmul(mul(query, sc), key.transpose(-2, -1));  // (..., L, S)
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    scores = where(causal_mask(L, S).to(scores.device()), scores, neg_inf);
  } else if (attn_mask.defined()) {
    scores = attn_mask.dtype() == kBool ? where(attn_mask, scores, neg_inf)
                                        : add(scores, attn_mask.to(scores.dtype()));
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0) weights = dropout(weights, dropout_p, /*training=*/true, gen);
  return matmul(weights, value);
}

}  // namespace mantissa
