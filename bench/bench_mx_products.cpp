// The mxfp8 recipe's kernels (fp8/mx_linear.h) at the reference models' Linear shapes
// (linear_shapes.h), one at a time: the three products of a training step with the operands and
// outputs the recipe gives them, and its casts of a bfloat16 tensor. CPU time is what to compare
// (run at one thread: OMP_NUM_THREADS=1; capped to AVX2 with MANTISSA_DISABLE_SIMD=avx512f).
//   BM_MxProduct/<shape>/0   y = x W^T + b, bfloat16 (x and W E4M3 along K)
//   BM_MxProduct/<shape>/1   dx = dy W, bfloat16 (dy E5M2 along N, W's column blocks)
//   BM_MxProduct/<shape>/2   dW = dy^T x, bfloat16 (dy's E5M2 and x's E4M3 column blocks, along
//                            the tokens)
//   BM_MxCast/<shape>/0      x to E4M3 along its rows, counting the statistics (input());
//                            /1 x's E4M3 column blocks (save()); /2, /3 dy to E5M2 along its
//                            rows with statistics and dy's column blocks: bytes/s counts the
//                            bfloat16 read and the codes written
//   build/bench_mx_products --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "linear_shapes.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/fp8/mx_linear.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;
namespace km = mantissa::kernels::mx;

// A rows x cols bfloat16 tensor of normal values with the given deviation.
Tensor bf16_normal(int64_t rows, int64_t cols, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  Tensor t = empty({rows, cols}, kBFloat16);
  auto* p = static_cast<uint16_t*>(t.data_ptr());
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = float_to_bf16_bits(dist(rng));
  return t;
}

constexpr auto kRceil = formats::E8m0Rounding::kRceil;

void BM_MxProduct(benchmark::State& state, LinearShape sc) {
  const int64_t T = sc.tokens, I = sc.in, O = sc.out;
  const Tensor x = bf16_normal(T, I, 1.0f, 1), w = bf16_normal(O, I, 0.05f, 2);
  const Tensor dy = bf16_normal(T, O, 0.01f, 3);
  const Tensor bias = bf16_normal(1, O, 0.1f, 4).reshape({O});
  const FormatId e4 = FormatId::kMxfp8E4m3, e5 = FormatId::kMxfp8E5m2;
  fp8::MxTensor a, b;
  Tensor b_bias;
  switch (state.range(0)) {
    case 0:
      a = fp8::quantize_mx(x, e4, kRceil, false), b = fp8::quantize_mx(w, e4, kRceil, false);
      b_bias = bias;
      break;
    case 1:  // dx = dy @ W: W's column blocks
      a = fp8::quantize_mx(dy, e5, kRceil, false);
      b = fp8::quantize_mx_columns(w, e4, kRceil, false);
      break;
    default:  // dW = dy^T @ x: both operands' column blocks
      a = fp8::quantize_mx_columns(dy, e5, kRceil, false);
      b = fp8::quantize_mx_columns(x, e4, kRceil, false);
      break;
  }
  for (auto _ : state) {
    const Tensor out = fp8::mx_gemm(a, b, b_bias, kBFloat16);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  // Each operand's matrix along K: a column-blocked tensor's transpose.
  const auto along_k = [](const fp8::MxTensor& q) {
    const bool t = q.blocks == formats::BlockAxis::kAlongColumns;
    return std::pair<double, double>(static_cast<double>(q.shape[t ? 1 : 0]),
                                     static_cast<double>(q.shape[t ? 0 : 1]));
  };
  const auto [M, K] = along_k(a);
  const double N = along_k(b).first;
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MxCast(benchmark::State& state, LinearShape sc) {
  const int64_t which = state.range(0);
  const bool grad = which >= 2, columns = which % 2 == 1;
  const int64_t T = sc.tokens, C = grad ? sc.out : sc.in;
  const Tensor x = bf16_normal(T, C, grad ? 0.01f : 1.0f, grad ? 3 : 1);
  const km::Element e = grad ? km::Element::kE5m2 : km::Element::kE4m3;
  std::vector<uint8_t> codes(static_cast<size_t>(T * C));
  std::vector<uint8_t> scales(static_cast<size_t>((T + 31) / 32 * C + T * ((C + 31) / 32)));
  km::MxCastStats st;
  for (auto _ : state) {
    if (columns)
      km::mx_quantize_columns(x.data_ptr(), kBFloat16, T, C, e, km::E8m0Rounding::kRceil,
                              codes.data(), scales.data());
    else
      km::mx_quantize(x.data_ptr(), kBFloat16, T, C, e, km::E8m0Rounding::kRceil, codes.data(),
                      scales.data(), simd_level(), &st);
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(st);
  }
  state.SetBytesProcessed(state.iterations() * T * C * 3);
}

const int kRegistered = [] {
  for (const LinearShape& sc : kModelLinearShapes) {
    benchmark::RegisterBenchmark((std::string("BM_MxProduct/") + sc.name).c_str(), BM_MxProduct, sc)
        ->DenseRange(0, 2)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_MxCast/") + sc.name).c_str(), BM_MxCast, sc)
        ->DenseRange(0, 3)
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
