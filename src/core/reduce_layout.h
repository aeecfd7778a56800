#pragma once
// The [outer, r, inner] view of a reduction, shared by the CPU and CUDA reduce kernels: the
// reduced dims form the middle extent r, the kept dims the outer and inner extents, permuting
// into a copy only for layouts like "reduce dims 0 and 2 of 4". Device-neutral (it only merges
// dims and calls contiguous / permute, which work on either device).
#include <cstdint>
#include <utility>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::detail {

struct ReduceLayout {
  int64_t outer = 1, r = 1, inner = 1;
};

// A contiguous, history-free tensor holding a's values and the [outer, r, inner] layout that
// reduces the dims flagged in `reduced` (one flag per dim of a).
inline std::pair<Tensor, ReduceLayout> reduce_layout(const Tensor& a,
                                                     const std::vector<bool>& reduced) {
  Tensor src = a.detach().contiguous();
  // Merge runs of kept / reduced dims (size-1 dims go with either).
  std::vector<std::pair<bool, int64_t>> groups;
  for (size_t d = 0; d < reduced.size(); ++d) {
    const int64_t n = a.shape()[d];
    if (n == 1) continue;
    if (!groups.empty() && groups.back().first == reduced[d]) {
      groups.back().second *= n;
    } else {
      groups.emplace_back(reduced[d], n);
    }
  }
  ReduceLayout l;
  const size_t g = groups.size();
  auto is_r = [&](size_t i) { return groups[i].first; };
  if (g == 0) return {src, l};
  if (g == 1) {
    (is_r(0) ? l.r : l.outer) = groups[0].second;
    return {src, l};
  }
  if (g == 2) {
    if (is_r(1)) {
      l.outer = groups[0].second;
      l.r = groups[1].second;
    } else {
      l.r = groups[0].second;
      l.inner = groups[1].second;
    }
    return {src, l};
  }
  if (g == 3 && is_r(1)) {
    l.outer = groups[0].second;
    l.r = groups[1].second;
    l.inner = groups[2].second;
    return {src, l};
  }
  // Interleaved: move the reduced dims last (a copy), giving [kept, reduced].
  std::vector<int64_t> order;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (!reduced[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < reduced.size(); ++d) (reduced[d] ? l.r : l.outer) *= a.shape()[d];
  return {src.permute(order).contiguous(), l};
}

}  // namespace mantissa::detail
