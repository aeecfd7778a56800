#pragma once
// Internal: a column-wise maximum pass of a row-major matrix split over OpenMP threads. Each
// thread takes a band of whole rows into its own `width` maxima (value-initialised, so 0), and
// the bands' maxima are merged once at the end. A maximum does not depend on the order its
// values come in, so the result is a one-thread pass's bit for bit. One read of the matrix is
// as much memory traffic as the cast that follows it; without the split that read ran on one
// thread however many the cast used.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/common/aligned_vector.h"

namespace mantissa::kernels {

// band(row_begin, row_count, maxima) raises maxima[0, width) with those rows; out[0, width)
// is raised by every band. `split`: whether the matrix is large enough to share out.
template <class T, class Band>
void column_maxima_in_bands(int64_t rows, int64_t width, bool split, T* out, const Band& band) {
  const int64_t bands = split ? std::min<int64_t>(omp_get_max_threads(), rows) : 1;
  if (bands <= 1 || omp_in_parallel()) {
    band(int64_t{0}, rows, out);
    return;
  }
  AlignedVector<T> part(static_cast<size_t>(bands * width), T{});
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(bands))
  for (int64_t b = 0; b < bands; ++b) {
    const int64_t begin = rows * b / bands, end = rows * (b + 1) / bands;
    band(begin, end - begin, part.data() + b * width);
  }
  for (int64_t b = 0; b < bands; ++b)
    for (int64_t i = 0; i < width; ++i)
      out[i] = std::max(out[i], part[static_cast<size_t>(b * width + i)]);
}

}  // namespace mantissa::kernels
