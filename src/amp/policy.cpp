// The autocast policy of every op. PyTorch's CPU lists decide where they name an op (matmul,
// linear, the losses, cat, stack); ops the CPU lists leave out but the CUDA lists name follow
// the CUDA intent (fp32 for exp/log/pow/rsqrt, and for softmax/log_softmax/sum, which CUDA
// computes in fp32 through their dtype argument; ours have none). See docs/autocast.md, "Policies".
// The same table serves CUDA autocast (ops on GPU tensors): PyTorch's CUDA lists agree with it
// for every op here (lower precision: matmul, linear, conv, attention; fp32: the losses,
// layer_norm, exp/log/pow/rsqrt, softmax/log_softmax/sum; promote: cat, stack), except that
// scatter_add and index_put stay fp32 where CUDA promotes (see their rows).
#include "amp/policy.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::amp {
namespace {

using P = CastPolicy;

constexpr std::string_view kCudaFp32 = "CUDA fp32 list (unlisted on PyTorch CPU)";
constexpr std::string_view kCudaOptDtype =
    "CUDA fp32_set_opt_dtype; no dtype argument here, so plain fp32 (as MPS registers it)";
constexpr std::string_view kNative = "no list: native type promotion (fp16 + fp32 gives fp32)";
constexpr std::string_view kSame = "no list: runs in its input dtype";
constexpr std::string_view kScatterPromote =
    "CUDA/MPS promote list; fp32 here, so values never accumulate in fp16/bf16";
constexpr std::string_view kComplex = "no list: complex tensors are never cast";
constexpr std::string_view kCompare = "no list: compares in the promoted dtype, bool result";

constexpr PolicyRow kTable[] = {
    // lower precision: the GEMMs, where bf16/fp16 pays (fp32 accumulation always)
    {"matmul", P::kLowerPrecision, "CPU lower_precision_fp list"},
    {"linear", P::kLowerPrecision, "CPU lower_precision_fp list"},
    // fp32: range- or precision-sensitive
    {"cross_entropy", P::kFp32, "CPU fp32 list (cross_entropy_loss)"},
    {"nll_loss", P::kFp32, "CPU fp32 list"},
    {"mse_loss", P::kFp32, "CPU fp32 list"},
    {"exp", P::kFp32, kCudaFp32},
    {"log", P::kFp32, kCudaFp32},
    {"rsqrt", P::kFp32, kCudaFp32},
    {"pow", P::kFp32, kCudaFp32},
    {"rdiv", P::kFp32, "CUDA fp32 list via reciprocal (scalar / tensor is reciprocal * scalar)"},
    {"softmax", P::kFp32, kCudaOptDtype},
    {"log_softmax", P::kFp32, kCudaOptDtype},
    {"sum", P::kFp32, kCudaOptDtype},
    // fp32: the scatter family, whose additions must not accumulate in fp16/bf16
    {"scatter_add", P::kFp32, kScatterPromote},
    {"index_put", P::kFp32, kScatterPromote},
    {"index_add", P::kFp32, "no PyTorch list (CPU promotes index_copy); fp32 like scatter_add"},
    {"scatter", P::kFp32, "no PyTorch list; fp32 like scatter_add, so the family agrees"},
    // promote: several tensor inputs meet in the widest floating dtype
    {"cat", P::kPromote, "CPU promote list"},
    {"stack", P::kPromote, "CPU promote list"},
    {"where", P::kPromote, "no PyTorch list (its native promotion gives the same dtypes)"},
    // unlisted
    {"add", P::kUnlisted, kNative},
    {"sub", P::kUnlisted, kNative},
    {"mul", P::kUnlisted, kNative},
    {"div", P::kUnlisted, kNative},
    {"rsub", P::kUnlisted, kNative},
    {"maximum", P::kUnlisted, kNative},
    {"minimum", P::kUnlisted, kNative},
    {"neg", P::kUnlisted, kSame},
    {"abs", P::kUnlisted, kSame},
    {"sqrt", P::kUnlisted, kSame},
    {"tanh", P::kUnlisted, kSame},
    {"sigmoid", P::kUnlisted, kSame},
    {"relu", P::kUnlisted, kSame},
    {"gelu", P::kUnlisted, kSame},
    {"silu", P::kUnlisted, kSame},
    {"silu_mul", P::kUnlisted, "no list: as mul(silu(gate), up), native type promotion"},
    {"rotate_half", P::kUnlisted, "no list: views, neg and cat, each with its own row"},
    {"apply_rotary_embedding", P::kUnlisted,
     "no list: in the dtype of x (cos and sin are cast to it), through mul and add"},
    {"clamp", P::kUnlisted, kSame},
    {"dropout", P::kUnlisted, kSame},
    {"mean", P::kUnlisted, "no list: accumulates in fp32, result in the input dtype"},
    {"amax", P::kUnlisted, kSame},
    {"max", P::kUnlisted, kSame},
    {"argmax", P::kUnlisted, "no list: int64 result"},
    {"index_select", P::kUnlisted, "no list: the integer index is never cast"},
    {"gather", P::kUnlisted, "no list: the integer index is never cast"},
    {"eq", P::kUnlisted, kCompare},
    {"ne", P::kUnlisted, kCompare},
    {"lt", P::kUnlisted, kCompare},
    {"le", P::kUnlisted, kCompare},
    {"gt", P::kUnlisted, kCompare},
    {"ge", P::kUnlisted, kCompare},
    {"isfinite", P::kUnlisted, "no list: bool result"},
    // complex tensors (docs/complex.md): autocast casts only fp32/fp16/bf16 tensors
    {"complex", P::kUnlisted, kComplex},
    {"real", P::kUnlisted, kComplex},
    {"imag", P::kUnlisted, kComplex},
    {"conj", P::kUnlisted, kComplex},
    {"angle", P::kUnlisted, kComplex},
    // convolution, pooling, normalisation (the CNN layers)
    {"conv2d", P::kLowerPrecision, "CPU lower_precision_fp list (conv1d/conv2d/conv3d)"},
    {"max_pool2d", P::kUnlisted, kSame},
    {"avg_pool2d", P::kUnlisted, kSame},
    {"adaptive_avg_pool2d", P::kUnlisted, kSame},
    {"batch_norm", P::kUnlisted,
     "no list: input dtype kept; statistics in fp32, fp32 weight with a bf16 input allowed"},
    // transformer ops
    {"layer_norm", P::kFp32, "CPU fp32 list"},
    {"scaled_dot_product_attention", P::kLowerPrecision, "CPU lower_precision_fp list"},
    {"embedding", P::kUnlisted, "no list: a row copy, the integer indices are never cast"},
};

}  // namespace

std::span<const PolicyRow> policy_table() { return kTable; }

CastPolicy policy_for(std::string_view op) {
  // Built once; lookups happen only while autocast is on.
  static const std::unordered_map<std::string_view, CastPolicy> index = [] {
    std::unordered_map<std::string_view, CastPolicy> m;
    for (const PolicyRow& r : kTable) m.emplace(r.op, r.policy);
    return m;
  }();
  const auto it = index.find(op);
  if (it == index.end())
    fail("autocast", "op '{}' has no row in the autocast policy table (src/amp/policy.cpp)", op);
  return it->second;
}

std::string_view policy_name(CastPolicy policy) {
  switch (policy) {
    case P::kLowerPrecision:
      return "lower_precision_fp";
    case P::kFp32:
      return "fp32";
    case P::kPromote:
      return "promote";
    case P::kUnlisted:
      return "unlisted";
  }
  return "?";
}

std::string policy_table_markdown() {
  std::vector<PolicyRow> rows(std::begin(kTable), std::end(kTable));
  std::stable_sort(rows.begin(), rows.end(), [](const PolicyRow& a, const PolicyRow& b) {
    return a.policy != b.policy ? a.policy < b.policy : a.op < b.op;
  });
  std::string md = "| op | policy | source |\n|---|---|---|\n";
  for (const PolicyRow& r : rows) {
    md += "| `";
    md += r.op;
    md += "` | ";
    md += policy_name(r.policy);
    md += " | ";
    md += r.source;
    md += " |\n";
  }
  return md;
}

}  // namespace mantissa::amp
