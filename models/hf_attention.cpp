#include "hf_attention.h"

#include "mantissa/core/shape.h"
#include "mantissa/ops/attention.h"

namespace mantissa::models {

namespace {

// (T, S) kBool: query t (the key at S - T + t is itself) sees key j when j <= S - T + t and,
// with a window W > 0, j > S - T + t - W.
Tensor causal_mask(int64_t T, int64_t S, int64_t window) {
  Tensor mask = empty({T, S}, kBool);
  bool* p = mask.data<bool>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < S; ++j) {
      const int64_t pos = S - T + t;
      p[t * S + j] = j <= pos && (window <= 0 || j > pos - window);
    }
  return mask;
}

}  // namespace

Tensor causal_attention(const Tensor& q, Tensor k, Tensor v, const LayerStep& step, double scale,
                        double dropout_p, Generator* gen, int64_t window) {
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
  // A window no shorter than the keys hides none of them.
  const bool windowed = window > 0 && window < S;
  Tensor out;
  if (S == T && !windowed) {
    out = scaled_dot_product_attention(qg, kg, vg, Tensor(), dropout_p, /*is_causal=*/T > 1, scale,
                                       gen);
  } else if (T == 1 && !windowed) {
    out = scaled_dot_product_attention(qg, kg, vg, Tensor(), dropout_p, false, scale, gen);
  } else {
    // New queries after cached ones are bottom-right aligned: query t is at key S - T + t.
    out = scaled_dot_product_attention(qg, kg, vg, causal_mask(T, S, window).to(q.device()),
                                       dropout_p, false, scale, gen);
  }
  // (B, H_kv, rep, T, D) -> (B, T, H * D)
  return out.reshape({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D});
}

}  // namespace mantissa::models
