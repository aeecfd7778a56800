// Cast throughput of the block formats (MXFP8, MXFP4, NVFP4; docs/mx_formats.md) in GB/s
// (bytes read + bytes written) at each SIMD level this CPU has, beside a memcpy moving the same
// number of bytes (half read, half written): a cast "at memory speed" shows about the memcpy's
// GB/s. 16M float32 elements (64 MiB in), far beyond the caches; threads as OpenMP gives them.
//   BM_Mx*/level/element   element 0 = E4M3, 1 = E5M2, 2 = E2M1 (MXFP4)
//   BM_Nvfp4Quantize/level/sr/bf16  the per-tensor amax pass and the 1x16 cast, rounded to
//                          nearest (sr 0) or stochastically (1), of a float32 (bf16 0) or bfloat16
//                          (1) source; both reads of the input are counted
//   BM_MxQuantizeStats, BM_Nvfp4QuantizeStats  the same casts counting their statistics
//                          (mx_stats.h, as --fp8 statistics intervals do)
//   BM_Nvfp4TensorScale/level/bf16  the amax pass alone (bytes read)
//   BM_Nvfp4Tiles/level/bf16  the weights' cast: the 16x16 tiles' amax pass (which gives the
//                          tensor scale) and the cast under them (two reads counted)
//   BM_Mxfp4QuantizeSr/level/bf16  MXFP4 with stochastic rounding (mxfp4_sr.h), one pass
//   BM_MxQuantizeBf16/level/element/columns/cols  the MXFP8 recipe's casts (element 0 =
//                          E4M3, 1 = E5M2, rounding rceil) of a bfloat16 source of 4096 rows and
//                          `cols` columns (4096, or 1024 as the GPT's widest activations): along
//                          rows counting their statistics (0), or down the columns without them
//                          (1, mx_quantize_columns)
//   BM_MxQuantizeF32Columns/level/element/cols  the MX copy with blocks down the columns (rceil)
//                          of a float32 x of 4096 rows and `cols` columns
//   BM_RhtTranspose        NVFP4's random Hadamard transform of a transpose (kernels/cpu/mx/
//                          hadamard.h): float32 in, float32 out; one loop for every level
//   BM_Memcpy/bytes        the reference
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/mx/hadamard.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"

namespace {

using namespace mantissa;
using namespace mantissa::bench;
namespace km = mantissa::kernels::mx;

constexpr int64_t kRows = 4096, kCols = 4096;  // 16M elements
constexpr int64_t kN = kRows * kCols;

const std::vector<float>& input() {
  static const std::vector<float> x = [] {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> v(static_cast<size_t>(kN));
    for (float& f : v) f = dist(rng);
    return v;
  }();
  return x;
}

km::Element element_of(int64_t i) { return static_cast<km::Element>(i); }

// Skips levels this CPU lacks (the kernels would run a lower one).
bool level_ok(benchmark::State& state, SimdLevel level) {
  if (level <= simd_level()) return true;
  state.SkipWithError("this CPU lacks the level");
  return false;
}

// With `stats`, the cast counts its statistics.
void mx_quantize_bench(benchmark::State& state, bool stats) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const km::Element e = element_of(state.range(1));
  if (!level_ok(state, level)) return;
  const std::vector<float>& x = input();
  std::vector<uint8_t> codes(static_cast<size_t>(kRows * km::code_bytes(e, kCols)));
  std::vector<uint8_t> scales(static_cast<size_t>(kN / km::kMxBlock));
  km::MxCastStats st;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::mx_quantize(x.data(), kFloat32, kRows, kCols, e, km::E8m0Rounding::kFloor, codes.data(),
                    scales.data(), level, stats ? &st : nullptr);
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(st);
  }
  set_bandwidth(state, start, static_cast<double>(4 * kN + codes.size() + scales.size()));
}
void BM_MxQuantize(benchmark::State& state) { mx_quantize_bench(state, false); }
void BM_MxQuantizeStats(benchmark::State& state) { mx_quantize_bench(state, true); }

void BM_MxDequantize(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const km::Element e = element_of(state.range(1));
  if (!level_ok(state, level)) return;
  std::vector<uint8_t> codes(static_cast<size_t>(kRows * km::code_bytes(e, kCols)));
  std::vector<uint8_t> scales(static_cast<size_t>(kN / km::kMxBlock));
  km::mx_quantize(input().data(), kFloat32, kRows, kCols, e, km::E8m0Rounding::kFloor, codes.data(),
                  scales.data());
  std::vector<float> out(static_cast<size_t>(kN));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::mx_dequantize(codes.data(), scales.data(), kRows, kCols, e, out.data(), level);
    benchmark::DoNotOptimize(out.data());
  }
  set_bandwidth(state, start, static_cast<double>(4 * kN + codes.size() + scales.size()));
}

const std::vector<uint16_t>& input_bf16() {
  static const std::vector<uint16_t> x = [] {
    std::vector<uint16_t> v(static_cast<size_t>(kN));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float_to_bf16_bits(input()[i]);
    return v;
  }();
  return x;
}

// n bytes on a 64-byte boundary, as the library's tensors are (std::vector's large blocks are
// not), so that casts which write whole cache lines may stream them.
struct LineAligned {
  explicit LineAligned(int64_t n)
      : p(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>((n + 63) / 64 * 64)))) {}
  ~LineAligned() { std::free(p); }
  LineAligned(const LineAligned&) = delete;
  LineAligned& operator=(const LineAligned&) = delete;
  uint8_t* data() const { return p; }
  uint8_t* p;
};

void BM_MxQuantizeBf16(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const km::Element e = element_of(state.range(1));
  const bool columns = state.range(2) != 0;
  const int64_t cols = state.range(3), n = kRows * cols;
  if (!level_ok(state, level)) return;
  const std::vector<uint16_t>& x = input_bf16();
  LineAligned codes(n), scales(n / km::kMxBlock);
  km::MxCastStats st;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    if (columns)
      km::mx_quantize_columns(x.data(), kBFloat16, kRows, cols, e, km::E8m0Rounding::kRceil,
                              codes.data(), scales.data(), level);
    else
      km::mx_quantize(x.data(), kBFloat16, kRows, cols, e, km::E8m0Rounding::kRceil, codes.data(),
                      scales.data(), level, &st);
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(st);
  }
  set_bandwidth(state, start, static_cast<double>(2 * n + n + n / km::kMxBlock));
}

// The MX copy with blocks down the columns of a float32 x of 4096 rows and `cols` columns (rceil,
// no statistics).
void BM_MxQuantizeF32Columns(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const km::Element e = element_of(state.range(1));
  const int64_t cols = state.range(2), n = kRows * cols;
  if (!level_ok(state, level)) return;
  const std::vector<float>& x = input();
  const int64_t code_bytes = kRows * km::code_bytes(e, cols);
  LineAligned codes(code_bytes), scales(n / km::kMxBlock);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::mx_quantize_columns(x.data(), kFloat32, kRows, cols, e, km::E8m0Rounding::kRceil,
                            codes.data(), scales.data(), level);
    benchmark::DoNotOptimize(codes.data());
  }
  set_bandwidth(state, start, static_cast<double>(4 * n + code_bytes + n / km::kMxBlock));
}

// The source of a bench: float32 or (bf16) bfloat16, and its bytes per element.
const void* source(bool bf16) {
  return bf16 ? static_cast<const void*>(input_bf16().data())
              : static_cast<const void*>(input().data());
}
DType source_dtype(bool bf16) { return bf16 ? kBFloat16 : kFloat32; }

void nvfp4_quantize_bench(benchmark::State& state, bool stats) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const bool bf16 = state.range(2) != 0;
  if (!level_ok(state, level)) return;
  const void* x = source(bf16);
  const DType dtype = source_dtype(bf16);
  std::vector<uint8_t> codes(static_cast<size_t>(kN / 2)), scales(static_cast<size_t>(kN / 16));
  km::MxCastStats st;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::Nvfp4Encoding enc;
    enc.tensor_scale = km::nvfp4_tensor_scale(x, dtype, kN, level);
    enc.rounding = state.range(1) ? km::Fp4Rounding::kStochastic : km::Fp4Rounding::kNearest;
    km::nvfp4_quantize(x, dtype, kRows, kCols, enc, codes.data(), scales.data(), level,
                       stats ? &st : nullptr);
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(st);
  }
  // The amax pass and the cast each read the input.
  const double in = static_cast<double>(kN * dtype.itemsize());
  set_bandwidth(state, start, 2 * in + static_cast<double>(codes.size() + scales.size()));
}
void BM_Nvfp4Quantize(benchmark::State& state) { nvfp4_quantize_bench(state, false); }
void BM_Nvfp4QuantizeStats(benchmark::State& state) { nvfp4_quantize_bench(state, true); }

void BM_Nvfp4TensorScale(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const bool bf16 = state.range(1) != 0;
  if (!level_ok(state, level)) return;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    float ts = km::nvfp4_tensor_scale(source(bf16), source_dtype(bf16), kN, level);
    benchmark::DoNotOptimize(ts);
  }
  set_bandwidth(state, start, static_cast<double>(kN * source_dtype(bf16).itemsize()));
}

void BM_Nvfp4Tiles(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const bool bf16 = state.range(1) != 0;
  if (!level_ok(state, level)) return;
  const void* x = source(bf16);
  const DType dtype = source_dtype(bf16);
  std::vector<uint8_t> codes(static_cast<size_t>(kN / 2)), scales(static_cast<size_t>(kN / 16));
  std::vector<float> tile_amax(static_cast<size_t>(kN / 256));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::Nvfp4Encoding enc;
    enc.tiles_16x16 = true;
    enc.tile_amax = tile_amax.data();
    enc.tensor_scale = km::nvfp4_tensor_scale_of(
        km::nvfp4_tile_amax(x, dtype, kRows, kCols, tile_amax.data(), level));
    km::nvfp4_quantize(x, dtype, kRows, kCols, enc, codes.data(), scales.data(), level);
    benchmark::DoNotOptimize(codes.data());
  }
  const double in = static_cast<double>(kN * dtype.itemsize());
  set_bandwidth(state, start, 2 * in + static_cast<double>(codes.size() + scales.size()));
}

void BM_Mxfp4QuantizeSr(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const bool bf16 = state.range(1) != 0;
  if (!level_ok(state, level)) return;
  const DType dtype = source_dtype(bf16);
  std::vector<uint8_t> codes(static_cast<size_t>(kN / 2)), scales(static_cast<size_t>(kN / 32));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::mxfp4_quantize_sr(source(bf16), dtype, kRows, kCols, 7, 1, codes.data(), scales.data(),
                          level);
    benchmark::DoNotOptimize(codes.data());
  }
  set_bandwidth(state, start,
                static_cast<double>(kN * dtype.itemsize() + codes.size() + scales.size()));
}

void BM_Nvfp4Dequantize(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  if (!level_ok(state, level)) return;
  std::vector<uint8_t> codes(static_cast<size_t>(kN / 2)), scales(static_cast<size_t>(kN / 16));
  km::Nvfp4Encoding enc;
  enc.tensor_scale = km::nvfp4_tensor_scale(input().data(), kFloat32, kN);
  km::nvfp4_quantize(input().data(), kFloat32, kRows, kCols, enc, codes.data(), scales.data());
  std::vector<float> out(static_cast<size_t>(kN));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::nvfp4_dequantize(codes.data(), scales.data(), kRows, kCols, enc.tensor_scale, out.data(),
                         level);
    benchmark::DoNotOptimize(out.data());
  }
  set_bandwidth(state, start, static_cast<double>(4 * kN + codes.size() + scales.size()));
}

void BM_RhtTranspose(benchmark::State& state) {
  const std::vector<float>& x = input();
  std::vector<float> out(static_cast<size_t>(kN));
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    km::rht_transpose(x.data(), kFloat32, kRows, kCols, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_bandwidth(state, start, static_cast<double>(8 * kN));
}

// memcpy of `bytes` / 2 (so `bytes` moved), split over the OpenMP threads as the casts are.
void BM_Memcpy(benchmark::State& state) {
  const int64_t half = state.range(0) / 2;
  std::vector<char> a(static_cast<size_t>(half), 1), b(static_cast<size_t>(half), 0);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    const int64_t chunk = 1 << 20;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < half; i += chunk)
      std::memcpy(b.data() + i, a.data() + i, static_cast<size_t>(std::min(chunk, half - i)));
    benchmark::DoNotOptimize(b.data());
  }
  set_bandwidth(state, start, static_cast<double>(2 * half));
}

void levels_and_elements(benchmark::internal::Benchmark* b) {
  for (int level : {0, 1, 2})
    for (int e : {0, 1, 2}) b->Args({level, e});
}

BENCHMARK(BM_MxQuantize)->Apply(levels_and_elements)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MxQuantizeStats)
    ->Apply(levels_and_elements)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MxDequantize)
    ->Apply(levels_and_elements)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MxQuantizeBf16)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}, {kCols, 1024}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MxQuantizeF32Columns)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}, {kCols, 1024}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4Quantize)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4QuantizeStats)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4TensorScale)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4Tiles)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mxfp4QuantizeSr)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4Dequantize)->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RhtTranspose)->UseRealTime()->Unit(benchmark::kMillisecond);
// The bytes the MXFP8 and the FP4 casts and the transform move (in + out), and NVFP4's two
// reads of a float32 and of a bfloat16 source.
BENCHMARK(BM_Memcpy)
    ->Arg(8 * kN)
    ->Arg(4 * kN + kN + kN / 32)
    ->Arg(4 * kN + kN / 2 + kN / 32)
    ->Arg(8 * kN + kN / 2 + kN / 16)
    ->Arg(4 * kN + kN / 2 + kN / 16)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("simd_level", simd_level_name(simd_level()));
  benchmark::AddCustomContext("mem_bw_gbps (measured, or MANTISSA_PEAK_MEM_GBPS)",
                              std::to_string(peak_mem_gbps()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
