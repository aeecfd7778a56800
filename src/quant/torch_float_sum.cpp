// The summation order of at::native's vectorized_inner_sum / row_sum / multi_row_sum for
// float32 with Vectorized<float> of 8 lanes: vectors are grouped in rows of 4 (instruction-
// level parallelism), rows are added into a 4-level cascade of partial sums, the leftovers are
// added, the 4 partial vectors are folded, and the scalar tail plus the 8 lanes are added last.
#include "quant/torch_float_sum.h"

#include <algorithm>
#include <vector>

namespace mantissa::quant::detail {
namespace {

constexpr int kLanes = 8;
constexpr int kIlp = 4;
constexpr int kLevels = 4;
int64_t ceil_log2(int64_t x) {  // c10::CeilLog2: 1 for x <= 2
  if (x <= 2) return 1;
  int64_t last = 63;
  const uint64_t v = static_cast<uint64_t>(x) - 1;
  while (!((v >> last) & 1)) --last;
  return last + 1;
}

// at::native's row_sum over `count` elements of `lanes` floats each (a vector of 8, or a single
// float for the scalar path): rows of kIlp elements go through the 4-level cascade, leftover
// elements join partial 0, then partials 1..3 are folded into it.
std::vector<float> row_sum(const float* x, int64_t count, int lanes) {
  using V = std::vector<float>;
  auto add = [&](V& a, const float* b) {
    for (int l = 0; l < lanes; ++l) a[l] += b[l];
  };
  const int64_t rows = count / kIlp;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(rows) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  std::vector<std::vector<V>> acc(kLevels, std::vector<V>(kIlp, V(lanes, 0.0f)));
  auto add_row = [&](int64_t i) {
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], x + (i * kIlp + k) * lanes);
  };
  int64_t i = 0;
  while (i + level_step <= rows) {
    for (int64_t j = 0; j < level_step; ++j, ++i) add_row(i);
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kIlp; ++k) {
        add(acc[j][k], acc[j - 1][k].data());
        std::fill(acc[j - 1][k].begin(), acc[j - 1][k].end(), 0.0f);
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < rows; ++i) add_row(i);
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], acc[j][k].data());
  V partial = acc[0][0];
  for (int64_t v = rows * kIlp; v < count; ++v) add(partial, x + v * lanes);
  for (int k = 1; k < kIlp; ++k) add(partial, acc[0][k].data());
  return partial;
}

}  // namespace

float torch_sum_f32(const float* x, int64_t n) {
  // Fewer elements than one vector: the scalar kernel, the same cascade on single floats.
  if (n < kLanes) return row_sum(x, n, 1)[0];
  const int64_t vec_size = n / kLanes;
  const std::vector<float> partial = row_sum(x, vec_size, kLanes);
  float total = 0.0f;
  for (int64_t e = vec_size * kLanes; e < n; ++e) total += x[e];
  for (int l = 0; l < kLanes; ++l) total += partial[l];
  return total;
}

float torch_mean_f32(const float* x, int64_t n) {
  return torch_sum_f32(x, n) / static_cast<float>(n);
}

}  // namespace mantissa::quant::detail
