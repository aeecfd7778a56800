#include "kernels/cpu/reduce/sum_rows.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {

// Whole rows are widened at once and added as plain arrays (contiguous streams that
// vectorise).
Tensor sum_rows(const Tensor& g2) {
  if (g2.is_cuda()) return gpu_kernels().sum_rows(g2);
  const Tensor g = g2.contiguous();
  const int64_t rows = g.size(0), n = g.size(1);
  Tensor out = empty({n}, g.dtype());
  dispatch_floating(g.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    // Chunks of 64 rows: 256 left the ViT's 4 352 rows in 17 chunks, one thread idle for a
    // seventeenth of the time.
    const int64_t per = rows <= 256 ? std::max<int64_t>(rows, 1) : 64;
    const int64_t chunks = std::max<int64_t>(1, (rows + per - 1) / per);
    const T* src = g.data<T>();
    std::vector<A> partial(static_cast<size_t>(chunks * n), A(0));
#pragma omp parallel if (rows * n > kParallelGrain && chunks > 1)
    {
      std::vector<A> buf(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        A* acc = partial.data() + c * n;
        for (int64_t r = c * per; r < std::min(rows, (c + 1) * per); ++r) {
          const A* v = load_block(src + r * n, 1, n, buf.data());
          // omp simd: -O2's cheap cost model leaves loops of unknown length scalar.
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) acc[j] += v[j];
        }
      }
    }
    for (int64_t c = 1; c < chunks; ++c) {
      const A* p = partial.data() + c * n;
      A* sum = partial.data();
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) sum[j] += p[j];
    }
    T* dst = out.data<T>();
    for (int64_t j = 0; j < n; ++j) dst[j] = store<T>(partial[j]);
  });
  return out;
}

Tensor sum_rows_f32_in_row_order(const Tensor& g2) {
  MANTISSA_CHECK(!g2.is_cuda() && g2.dim() == 2 &&
                     (g2.dtype() == kFloat32 || g2.dtype() == kBFloat16 || g2.dtype() == kFloat16),
                 "sum_rows_f32_in_row_order",
                 "expected a 2-D float32, bfloat16 or float16 CPU tensor, got {} {} on {}",
                 g2.dtype().name(), shape_str(g2.shape()), g2.device().str());
  const Tensor g = g2.contiguous();
  const int64_t rows = g.size(0), n = g.size(1);
  Tensor out = empty({n}, kFloat32);
  float* dst = out.data<float>();
  // One block of columns per thread (whole 16-column groups): each row's part is read as one
  // contiguous stretch and the threads get equal shares. Every column is still summed over
  // the rows in order, so the split does not change a bit.
  const bool parallel = rows * n > kParallelGrain && !omp_in_parallel();
  const int64_t parts =
      parallel ? std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), (n + 15) / 16)) : 1;
  const int64_t width = ((n + parts - 1) / parts + 15) / 16 * 16;
  dispatch_floating(g.dtype(), "sum_rows_f32_in_row_order", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<acc_t<T>, float>) {
      const T* src = g.data<T>();
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
      for (int64_t b = 0; b < parts; ++b) {
        const int64_t c0 = b * width, m = std::min(width, n - c0);
        if (m <= 0) continue;
        std::vector<float> acc(static_cast<size_t>(m), 0.0f), buf;
        for (int64_t r = 0; r < rows; ++r) {
          if constexpr (std::is_same_v<T, BFloat16>) {
            // Widened in the loop (exact: the bits shifted up), not by a conversion call per
            // row.
            const auto* bits = reinterpret_cast<const uint16_t*>(src + r * n + c0);
            float* a = acc.data();
#pragma omp simd
            for (int64_t j = 0; j < m; ++j)
              a[j] += std::bit_cast<float>(static_cast<uint32_t>(bits[j]) << 16);
          } else {
            buf.resize(static_cast<size_t>(m));
            const float* v = load_block(src + r * n + c0, 1, m, buf.data());
            float* a = acc.data();
#pragma omp simd
            for (int64_t j = 0; j < m; ++j) a[j] += v[j];
          }
        }
        std::copy(acc.begin(), acc.end(), dst + c0);
      }
    }
  });
  return out;
}

}  // namespace mantissa::kernels
