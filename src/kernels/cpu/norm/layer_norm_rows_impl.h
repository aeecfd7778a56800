// Internal: the layer-norm row loops (see layer_norm_rows.h), included inside an anonymous
// namespace by layer_norm_rows.cpp (baseline ISA) and layer_norm_rows_avx2.cpp (AVX2 + FMA);
// `omp simd` lets each build vectorise the loops for its own ISA.

// Sum of n values in kLanes interleaved partial sums combined in a fixed tree.
inline float lane_sum(const float* v, int64_t n) {
  constexpr int64_t kLanes = 16;
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += v[j + l];
  for (int64_t l = 0; j < n; ++j, ++l) {
    part[l] += v[j];
  }
  // Unrolled into straight-line adds (the same adds in the same order): as loops, the tree
  // and its branches cost about as much as summing a 128-value row (the ViT's).
#pragma GCC unroll 4
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
#pragma GCC unroll 8
    for (int64_t l = 0; l < w; ++l) part[l] += part[l + w];
  return part[0];
}

void row_forward(const float* x, const float* w, const float* b, float* y, float* d, int64_t n,
                 float eps, float* mean, float* rstd) {
  // Two passes (mean, then centred sum of squares): no cancellation for large means.
  const float m = lane_sum(x, n) / static_cast<float>(n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    d[j] = x[j] - m;
    y[j] = d[j] * d[j];  // y is scratch until the last loop
  }
  const float rs = 1.0f / std::sqrt(lane_sum(y, n) / static_cast<float>(n) + eps);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = d[j] * rs * w[j] + b[j];
  *mean = m;
  *rstd = rs;
}

void row_backward(const float* g, const float* x, const float* w, float m, float rs, float* dx,
                  float* gh, float* xh, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    gh[j] = g[j] * w[j];
    xh[j] = (x[j] - m) * rs;
  }
  const float sg = lane_sum(gh, n) / static_cast<float>(n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dx[j] = gh[j] * xh[j];  // dx is scratch until the last loop
  const float sgx = lane_sum(dx, n) / static_cast<float>(n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dx[j] = rs * (gh[j] - sg - xh[j] * sgx);
}

void accumulate_wb(const float* g, const float* xhat, float* sw, float* sb, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    sw[j] += g[j] * xhat[j];
    sb[j] += g[j];
  }
}

constexpr LnRowKernels kTable{row_forward, row_backward, accumulate_wb};
