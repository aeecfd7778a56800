// The summation order of at::native's vectorized_inner_sum / row_sum / multi_row_sum for
// float32 with Vectorized<float> of 8 lanes: vectors are grouped in rows of 4 (instruction-
// level parallelism), rows are added into a 4-level cascade of partial sums, the leftovers are
// added, the 4 partial vectors are folded, and the scalar tail plus the 8 lanes are added last.
#include "quant/torch_float_sum.h"

#include <algorithm>
#include <array>

namespace mantissa::quant::detail {
namespace {

constexpr int kLanes = 8;
constexpr int kIlp = 4;
constexpr int kLevels = 4;
using Vec = std::array<float, kLanes>;

void add(Vec& a, const Vec& b) {
  for (int l = 0; l < kLanes; ++l) a[l] += b[l];
}

Vec load(const float* p) {
  Vec v;
  std::copy(p, p + kLanes, v.begin());
  return v;
}

int64_t ceil_log2(int64_t x) {  // c10::CeilLog2: 1 for x <= 2
  if (x <= 2) return 1;
  int64_t last = 63;
  const uint64_t v = static_cast<uint64_t>(x) - 1;
  while (!((v >> last) & 1)) --last;
  return last + 1;
}

}  // namespace

float torch_sum_f32(const float* x, int64_t n) {
  const int64_t vec_size = n / kLanes;
  const int64_t rows = vec_size / kIlp;  // rows of kIlp vectors
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(rows) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  Vec acc[kLevels][kIlp] = {};
  auto add_row = [&](int64_t i) {
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], load(x + (i * kIlp + k) * kLanes));
  };
  int64_t i = 0;
  while (i + level_step <= rows) {
    for (int64_t j = 0; j < level_step; ++j, ++i) add_row(i);
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kIlp; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = Vec{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < rows; ++i) add_row(i);
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], acc[j][k]);
  Vec partial = acc[0][0];
  for (int64_t v = rows * kIlp; v < vec_size; ++v) add(partial, load(x + v * kLanes));
  for (int k = 1; k < kIlp; ++k) add(partial, acc[0][k]);
  float total = 0.0f;
  for (int64_t e = vec_size * kLanes; e < n; ++e) total += x[e];
  for (int l = 0; l < kLanes; ++l) total += partial[l];
  return total;
}

float torch_mean_f32(const float* x, int64_t n) {
  return torch_sum_f32(x, n) / static_cast<float>(n);
}

}  // namespace mantissa::quant::detail
