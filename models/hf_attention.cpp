#include "hf_attention.h"

#include "mantissa/core/shape.h"
#include "mantissa/ops/attention.h"

namespace mantissa::models {

Tensor causal_attention(const Tensor& q, Tensor k, Tensor v, const LayerStep& step, double scale,
                        double dropout_p, Generator* gen) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1);
  if (step.keys) {
    k = step.keys->append(k);
    v = step.values->append(v);
  }
  const int64_t S = k.size(2);
  // Query heads grouped by the key/value head they read: (B, H_kv, H / H_kv, T, D) against
  // keys (B, H_kv, 1, S, D), broadcast instead of copied.
  const int64_t rep = H / Hkv;
  const Tensor qg = q.reshape({B, Hkv, rep, T, D});
  const Tensor kg = k.unsqueeze(2), vg = v.unsqueeze(2);
  Tensor out;
  if (S == T) {
    out = scaled_dot_product_attention(qg, kg, vg, Tensor(), dropout_p, /*is_causal=*/T > 1, scale,
                                       gen);
  } else if (T == 1) {
    out = scaled_dot_product_attention(qg, kg, vg, Tensor(), dropout_p, false, scale, gen);
  } else {
    // New queries after cached ones: query t sees keys up to S - T + t (bottom-right aligned).
    Tensor mask = empty({T, S}, kBool);
    bool* p = mask.data<bool>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < S; ++j) p[t * S + j] = j <= S - T + t;
    out =
        scaled_dot_product_attention(qg, kg, vg, mask.to(q.device()), dropout_p, false, scale, gen);
  }
  // (B, H_kv, rep, T, D) -> (B, T, H * D)
  return out.reshape({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D});
}

}  // namespace mantissa::models
