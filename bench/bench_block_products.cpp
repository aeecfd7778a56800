// The block recipe's kernels (kernels/cpu/fp8/fp8_block.h) at the reference models' Linear
// shapes (linear_shapes.h), one at a time: the three products of a training step with the
// operands the recipe gives them, and its casts. CPU time is what to compare (run at one thread:
// OMP_NUM_THREADS=1; capped to AVX2 with MANTISSA_DISABLE_SIMD=avx512f).
//   BM_BlockProduct/<shape>/0   y = x W^T   (x in 1x128 tiles, W in 128x128 blocks)
//   BM_BlockProduct/<shape>/1   dx = dy W   (W read down its columns)
//   BM_BlockProduct/<shape>/2   dW = dy^T x (both in 128x1 tiles of their columns, read where
//                               they lie: tiles along the tokens)
//   BM_BlockProductBf16/<shape>/0-2  the same three through fp8::block_gemm with the recipe's
//                               outputs: y and dx in bfloat16 (y with a bias), dW in float32;
//                               /3, /4: y and dx made in float32 and rounded to bfloat16 after
//   BM_BlockCast/<shape>/0      x to 1x128 tiles; /1 x to 128x1 tiles (the column-wise copy);
//                               bytes/s counts the bfloat16 read and the codes written
//   build/bench_block_products --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/fp8/fp8_block.h"
#include "linear_shapes.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/dtype.h"
#include "mantissa/fp8/block_scaling.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;
namespace kf = mantissa::kernels::fp8;

// n bfloat16 values, normal with the given deviation.
std::vector<uint16_t> bf16_normal(int64_t n, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& b : v) b = float_to_bf16_bits(dist(rng));
  return v;
}

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
};

Quantized tiles(const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  Quantized q{std::vector<uint8_t>(static_cast<size_t>(rows * cols)),
              std::vector<float>(static_cast<size_t>(rows * kf::block_count(cols)))};
  kf::quantize_1x128(x.data(), kBFloat16, rows, cols, cols, q.codes.data(), q.scale_inv.data(),
                     kFloat8_e4m3fn, true, 0.0f);
  return q;
}
Quantized column_tiles(const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  Quantized q{std::vector<uint8_t>(static_cast<size_t>(rows * cols)),
              std::vector<float>(static_cast<size_t>(cols * kf::block_count(rows)))};
  kf::quantize_128x1(x.data(), kBFloat16, rows, cols, cols, q.codes.data(), q.scale_inv.data(),
                     kFloat8_e4m3fn, true, 0.0f);
  return q;
}
Quantized blocks(const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  Quantized q{
      std::vector<uint8_t>(static_cast<size_t>(rows * cols)),
      std::vector<float>(static_cast<size_t>(kf::block_count(rows) * kf::block_count(cols)))};
  kf::quantize_128x128(x.data(), kBFloat16, rows, cols, cols, q.codes.data(), q.scale_inv.data(),
                       kFloat8_e4m3fn, true, 0.0f);
  return q;
}

// Stored codes [R, C] read as V = X (1x128 tiles or 128x128 blocks along C) or V = X^T.
kf::BlockOperandView view(const Quantized& q, int64_t C, bool block128, bool transposed) {
  const int64_t scale_cols = kf::block_count(C);
  kf::BlockOperandView v{};
  v.codes = q.codes.data();
  v.fp8 = kFloat8_e4m3fn;
  v.scale_inv = q.scale_inv.data();
  v.row_stride = transposed ? 1 : C;
  v.col_stride = transposed ? C : 1;
  v.tile_rows = block128 ? kf::kBlockLen : 1;
  v.scale_row_stride = transposed ? 1 : scale_cols;
  v.scale_col_stride = transposed ? scale_cols : 1;
  return v;
}

// 128x1 tiles of stored codes [R, C] read as V = X^T (tiles along R, the product's K).
kf::BlockOperandView column_view(const Quantized& q, int64_t C) {
  kf::BlockOperandView v{};
  v.codes = q.codes.data();
  v.fp8 = kFloat8_e4m3fn;
  v.scale_inv = q.scale_inv.data();
  v.row_stride = 1;
  v.col_stride = C;
  v.tile_rows = 1;
  v.scale_row_stride = 1;
  v.scale_col_stride = C;
  return v;
}

void BM_BlockProduct(benchmark::State& state, LinearShape sc) {
  const int64_t T = sc.tokens, I = sc.in, O = sc.out;
  const auto x = bf16_normal(T * I, 1.0f, 1), w = bf16_normal(O * I, 0.05f, 2);
  const auto dy = bf16_normal(T * O, 0.01f, 3);
  const Quantized qx = tiles(x, T, I), qw = blocks(w, O, I), qdy = tiles(dy, T, O);
  const Quantized qxc = column_tiles(x, T, I), qdyc = column_tiles(dy, T, O);
  int64_t M = 0, N = 0, K = 0;
  kf::BlockOperandView a{}, b{};
  switch (state.range(0)) {
    case 0:  // y [T, O] = x [T, I] W^T: V_b = W
      M = T, N = O, K = I, a = view(qx, I, false, false), b = view(qw, I, true, false);
      break;
    case 1:  // dx [T, I] = dy [T, O] W [O, I]: V_b = W^T
      M = T, N = I, K = O, a = view(qdy, O, false, false), b = view(qw, I, true, true);
      break;
    default:  // dW [O, I] = dy^T [O, T] x [T, I]: V_a = dy^T, V_b = x^T, 128x1 tiles along T
      M = O, N = I, K = T, a = column_view(qdyc, O), b = column_view(qxc, I);
      break;
  }
  std::vector<float> out(static_cast<size_t>(M * N));
  for (auto _ : state) {
    kf::block_scaled_gemm(a, b, M, N, K, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

Tensor bf16_tensor(const std::vector<uint16_t>& v, int64_t rows, int64_t cols) {
  Tensor t = empty({rows, cols}, kBFloat16);
  std::copy(v.begin(), v.end(), static_cast<uint16_t*>(t.data_ptr()));
  return t;
}

void BM_BlockProductBf16(benchmark::State& state, LinearShape sc) {
  const int64_t T = sc.tokens, I = sc.in, O = sc.out;
  const Tensor x = bf16_tensor(bf16_normal(T * I, 1.0f, 1), T, I);
  const Tensor w = bf16_tensor(bf16_normal(O * I, 0.05f, 2), O, I);
  const Tensor dy = bf16_tensor(bf16_normal(T * O, 0.01f, 3), T, O);
  const Tensor bias = bf16_tensor(bf16_normal(O, 0.1f, 4), 1, O).reshape({O});
  const fp8::BlockFp8 qx = fp8::quantize_1x128(x), qw = fp8::quantize_128x128(w);
  const fp8::BlockFp8 qdy = fp8::quantize_1x128(dy);
  const fp8::BlockFp8 qxc = fp8::quantize_128x1(x);
  const fp8::BlockFp8 qdyc = fp8::quantize_128x1(dy);
  const int64_t which = state.range(0);
  for (auto _ : state) {
    Tensor out;
    switch (which) {
      case 0:
        out = fp8::block_gemm(qx, false, qw, true, bias, kBFloat16);
        break;
      case 1:
        out = fp8::block_gemm(qdy, false, qw, false, Tensor(), kBFloat16);
        break;
      case 2:
        out = fp8::block_gemm(qdyc, true, qxc, false, Tensor(), kFloat32);
        break;
      case 3:
        out = fp8::block_gemm(qx, false, qw, true, bias, kFloat32).to(kBFloat16);
        break;
      default:
        out = fp8::block_gemm(qdy, false, qw, false, Tensor(), kFloat32).to(kBFloat16);
        break;
    }
    benchmark::DoNotOptimize(out.data_ptr());
  }
}

void BM_BlockCast(benchmark::State& state, LinearShape sc) {
  const int64_t T = sc.tokens, I = sc.in;
  const auto x = bf16_normal(T * I, 1.0f, 1);
  std::vector<uint8_t> codes(static_cast<size_t>(T * I));
  std::vector<float> inv(static_cast<size_t>(T * I / kf::kBlockLen + T + I));
  for (auto _ : state) {
    if (state.range(0) == 0)
      kf::quantize_1x128(x.data(), kBFloat16, T, I, I, codes.data(), inv.data(), kFloat8_e4m3fn,
                         true, 0.0f);
    else
      kf::quantize_128x1(x.data(), kBFloat16, T, I, I, codes.data(), inv.data(), kFloat8_e4m3fn,
                         true, 0.0f);
    benchmark::DoNotOptimize(codes.data());
  }
  state.SetBytesProcessed(state.iterations() * T * I * 3);
}

const int kRegistered = [] {
  for (const LinearShape& sc : kModelLinearShapes) {
    benchmark::RegisterBenchmark((std::string("BM_BlockProduct/") + sc.name).c_str(),
                                 BM_BlockProduct, sc)
        ->DenseRange(0, 2)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_BlockProductBf16/") + sc.name).c_str(),
                                 BM_BlockProductBf16, sc)
        ->DenseRange(0, 4)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_BlockCast/") + sc.name).c_str(), BM_BlockCast, sc)
        ->DenseRange(0, 1)
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
