// Whether each FP8/FP4 recipe's casts run at memory speed (issue: "cast kernels must reach memory
// speed on AVX2 and AVX-512"): every cast a training step makes, on a 4096 x 4096 source far
// beyond the caches, timed against a memcpy that moves the same number of bytes (half read, half
// written, split over the same OpenMP threads). Each round runs the cast and then the memcpy, so
// a neighbour's load falls on both; the ratio of a round is memcpy time / cast time, so 1 means
// the cast moves its bytes as fast as memcpy moves bytes. Prints each cast's GB/s (median) and
// the median ratio with its smallest and largest.
//
// A cast's bytes are what it must move at the least: the source read once per pass that needs the
// whole tensor before it can write (current scaling and NVFP4, rows or 16x16 tiles, take the
// tensor's amax first, the rowwise recipes' column-wise copy each column's, so two reads), plus
// the codes and scales written. The casts run through the recipes' own entry points
// (include/mantissa/fp8/), statistics on as training records them.
//
//   OMP_NUM_THREADS=1 build/bench_cast_memory_speed [ROUNDS] [FILTER] [cpu]
//   MANTISSA_DISABLE_SIMD=avx512f build/bench_cast_memory_speed 15 mx
//
// Two "floor" rows bound what any cast can reach here: they take each bfloat16's high byte (no
// amax, no scale, one shift and pack per 16 elements), once with ordinary stores and once with
// streaming stores. Their ratio is the most a bfloat16 -> 8-bit cast can show against this memcpy
// on this machine; a cast below it by far is bound by its instructions, not by memory.
//
// FILTER keeps the casts whose name contains it ("" keeps all). ROUNDS defaults to 11. With
// `cpu`, each side is timed in the process's CPU time instead of wall time: on a machine others
// load, the time this process ran, which the neighbours' share of the cores does not inflate
// (at two threads the sum of both threads' time; run it with OMP_WAIT_POLICY=passive so that no
// thread is charged for spinning at a barrier).
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "mantissa/core/cpu_features.h"
#include "mantissa/fp8/block_scaling.h"
#include "mantissa/fp8/current_scaling.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/mx_linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/fp8/rowwise.h"
#include "mantissa/fp8/tensor.h"
#include "mantissa/mantissa.h"

namespace {

using namespace mantissa;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 4096, kCols = 4096, kN = kRows * kCols;

struct Cast {
  std::string name;
  double bytes;  // read + written, at the least
  std::function<void()> run;
};

bool g_cpu_time = false;  // the `cpu` argument

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_of(const std::function<void()>& f) {
  if (g_cpu_time) {
    const double t0 = cpu_seconds();
    f();
    return cpu_seconds() - t0;
  }
  const Clock::time_point t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// memcpy of `bytes` from a to b, each OpenMP thread copying its share.
void parallel_copy(const uint8_t* a, uint8_t* b, int64_t bytes) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (bytes + threads - 1) / threads / 64 * 64;
    const int64_t begin = std::min(bytes, t * chunk);
    const int64_t end = t == threads - 1 ? bytes : std::min(bytes, begin + chunk);
    std::memcpy(b + begin, a + begin, static_cast<size_t>(end - begin));
  }
}

// The floor rows' body: dst[i] = the high byte of src[i], over the OpenMP threads, 64 elements a
// step (n is a multiple of 64 and both buffers are 64-byte aligned).
__attribute__((target("avx2"))) void high_bytes(const uint16_t* src, uint8_t* dst, int64_t n,
                                                bool streamed) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 64) {
    const auto* s = reinterpret_cast<const __m256i*>(src + i);
    // packus interleaves 128-bit lanes; the order of the bytes does not matter to a bound.
    const __m256i lo = _mm256_packus_epi16(_mm256_srli_epi16(_mm256_load_si256(s), 8),
                                           _mm256_srli_epi16(_mm256_load_si256(s + 1), 8));
    const __m256i hi = _mm256_packus_epi16(_mm256_srli_epi16(_mm256_load_si256(s + 2), 8),
                                           _mm256_srli_epi16(_mm256_load_si256(s + 3), 8));
    auto* d = reinterpret_cast<__m256i*>(dst + i);
    if (streamed) {
      _mm256_stream_si256(d, lo);
      _mm256_stream_si256(d + 1, hi);
    } else {
      _mm256_store_si256(d, lo);
      _mm256_store_si256(d + 1, hi);
    }
  }
  _mm_sfence();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The casts of one source dtype. Codes are 1 byte (FP8) or half a byte (FP4) per element; MX
// scales one byte per 32, NVFP4's one per 16, block's a float per 128 (1x128) or per 128 x 128,
// rowwise's two floats per row.
std::vector<Cast> casts_of(const Tensor& x, const std::shared_ptr<fp8::ScalingState>& state,
                           const fp8::Recipe& current) {
  const double n = static_cast<double>(kN), src = n * static_cast<double>(x.dtype().itemsize());
  const double fp8_out = n, fp4_out = n / 2;
  const std::string d = x.dtype() == kBFloat16 ? "bf16" : "f32";
  std::vector<Cast> c;
  if (x.dtype() == kBFloat16 && cpu_features().avx2) {
    const auto out = std::make_shared<Tensor>(empty({kN}, kUInt8));
    for (const bool streamed : {false, true})
      c.push_back({std::string("floor bf16 high bytes, ") + (streamed ? "streamed" : "stored"),
                   src + fp8_out, [&x, out, streamed] {
                     high_bytes(static_cast<const uint16_t*>(x.data_ptr()),
                                static_cast<uint8_t*>(out->data_ptr()), kN, streamed);
                   }});
  }
  c.push_back({"current " + d + " (amax + cast)", 2 * src + fp8_out, [&x, state, &current] {
                 (void)fp8::quantize_current(x, kFloat8_e4m3fn, *state, 0, current);
               }});
  // The same cast where the GEMM reads bfloat16 copies of the codes (CPUs with AVX-512 BF16):
  // those copies written as well. Elsewhere training makes no copies, and the row would be the
  // cast above.
  if (fp8::gemm_widens_codes())
    c.push_back({"current widened " + d + " (amax + cast + bf16 codes)", 2 * src + 3 * fp8_out,
                 [&x, state, &current] {
                   (void)fp8::quantize_current(x, kFloat8_e4m3fn, *state, 0, current, true);
                 }});
  c.push_back({"rowwise rows " + d, src + fp8_out + 8.0 * kRows,
               [&x] { (void)fp8::quantize_rows(x, kFloat8_e4m3fn, true); }});
  c.push_back({"rowwise columns " + d + " (amax + cast)", 2 * src + fp8_out + 8.0 * kCols,
               [&x] { (void)fp8::quantize_columns(x, kFloat8_e4m3fn, true); }});
  c.push_back(
      {"block 1x128 " + d, src + fp8_out + 4 * n / 128, [&x] { (void)fp8::quantize_1x128(x); }});
  // The column-wise copy (x^T's 1x128 tiles), in x's layout.
  c.push_back({"block 128x1 columns " + d, src + fp8_out + 4 * n / 128,
               [&x] { (void)fp8::quantize_128x1(x); }});
  c.push_back({"block 128x128 " + d, src + fp8_out + 4 * n / (128 * 128),
               [&x] { (void)fp8::quantize_128x128(x); }});
  c.push_back({"mxfp8 rows " + d, src + fp8_out + n / 32, [&x] {
                 (void)fp8::quantize_mx(x, FormatId::kMxfp8E4m3, formats::E8m0Rounding::kRceil);
               }});
  // The recipes' column-wise copies: x's codes with 32 x 1 blocks down its columns.
  c.push_back({"mxfp8 columns " + d, src + fp8_out + n / 32, [&x] {
                 (void)fp8::quantize_mx_columns(x, FormatId::kMxfp8E4m3,
                                                formats::E8m0Rounding::kRceil, false);
               }});
  c.push_back({"mxfp4 columns " + d, src + fp4_out + n / 32, [&x] {
                 (void)fp8::quantize_mx_columns(x, FormatId::kMxfp4, formats::E8m0Rounding::kFloor,
                                                false);
               }});
  c.push_back({"mxfp4 rows " + d, src + fp4_out + n / 32, [&x] {
                 (void)fp8::quantize_mx(x, FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
               }});
  c.push_back({"nvfp4 rows " + d + " (amax + cast)", 2 * src + fp4_out + n / 16,
               [&x] { (void)fp8::quantize_nvfp4(x, {}); }});
  c.push_back({"nvfp4 rows stochastic " + d + " (amax + cast)", 2 * src + fp4_out + n / 16,
               [&x] { (void)fp8::quantize_nvfp4(x, {.stochastic = true}); }});
  // The tiles' amax pass gives the tensor scale, which every code needs: two reads.
  c.push_back({"nvfp4 16x16 " + d + " (amax + cast)", 2 * src + fp4_out + n / 16,
               [&x] { (void)fp8::quantize_nvfp4(x, {.tiles_16x16 = true}); }});
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(3, std::atoi(argv[1])) : 11;
  const std::string filter = argc > 2 ? argv[2] : "";
  g_cpu_time = argc > 3 && std::string(argv[3]) == "cpu";
  manual_seed(0);
  const Tensor f32 = randn({kRows, kCols}) * 3.0;
  const Tensor bf16 = f32.to(kBFloat16);
  auto state = std::make_shared<fp8::ScalingState>(1, 1);
  fp8::Recipe current;
  current.kind = fp8::RecipeKind::kCurrent;

  // memcpy's buffers come from the tensors' allocator, so they lie on the same kind of pages.
  const Tensor from_t = full({6 * kN}, 1.0, kUInt8);
  const Tensor to_t = zeros({6 * kN}, kUInt8);
  const auto* from = static_cast<const uint8_t*>(from_t.data_ptr());
  auto* to = static_cast<uint8_t*>(to_t.data_ptr());

  std::printf("simd level %s, %d threads, %d rounds, source %lld x %lld, %s time\n",
              simd_level_name(simd_level()), omp_get_max_threads(), rounds,
              static_cast<long long>(kRows), static_cast<long long>(kCols),
              g_cpu_time ? "CPU" : "wall");
  std::printf("%-44s %9s %9s %7s %15s\n", "cast", "GB/s", "memcpy", "ratio", "[min, max]");
  for (const Tensor* x : {&bf16, &f32}) {
    for (const Cast& c : casts_of(*x, state, current)) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const auto half = static_cast<int64_t>(c.bytes / 2);
      const std::function<void()> copy = [&] { parallel_copy(from, to, half); };
      c.run();  // warm: the allocator's cache, the threads
      copy();
      std::vector<double> cast_s, copy_s, ratio;
      for (int r = 0; r < rounds; ++r) {
        cast_s.push_back(seconds_of(c.run));
        copy_s.push_back(seconds_of(copy));
        ratio.push_back(copy_s.back() / cast_s.back());
      }
      const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
      std::printf("%-44s %9.2f %9.2f %7.2f    [%.2f, %.2f]\n", c.name.c_str(),
                  c.bytes * 1e-9 / median(cast_s), 2.0 * half * 1e-9 / median(copy_s),
                  median(ratio), *lo, *hi);
      std::fflush(stdout);
    }
  }
  return 0;
}
