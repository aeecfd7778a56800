// The AVX2 path of the native GEMM (kernels/cpu/gemm/gemm_native_avx2.cpp), which runs on CPUs
// with AVX2+FMA+F16C and no AVX-512 (or with MANTISSA_DISABLE_SIMD=avx512f on one that has it).
// f32, bf16 and f16 operands are all widened to fp32 while packed, so:
//  - f32 results match the fp64 reference GEMM (gemm_reference.h) within fp32 reassociation
//    error, around the 6x16 micro-tile and the 256-deep K blocks;
//  - bf16 and f16 operands give exactly the bits of the same GEMM on their fp32 widenings
//    (same values, same kernel, same order of FMAs), and a bf16/f16 output is that fp32
//    result rounded once, as Tensor::to rounds it;
//  - matmul on bf16/f16 tensors routes here and returns what widening, an fp32 matmul and one
//    rounding return.
// The shared tests in test_gemm_native.cpp (transposes, padding, batches, bias, threads) run
// this path too on such a CPU.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/gemm/gemm_reference.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/half.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using kernels::GemmArgs;
using kernels::GemmBackend;

bool avx2_path() { return simd_level() == SimdLevel::kAvx2; }

#define SKIP_WITHOUT_AVX2_PATH()                                                     \
  if (!avx2_path())                                                                  \
  GTEST_SKIP() << "the AVX2 GEMM path runs only at SIMD level avx2 (this CPU is at " \
               << simd_level_name(simd_level()) << "; MANTISSA_DISABLE_SIMD=avx512f lowers it)"

// bf16 and f16 products take this path at the AVX-512 levels too (widened while packed onto
// the 6x32 tile where AVX-512 has no arithmetic of theirs; gemm_native.h).
#define SKIP_WITHOUT_AVX2_PATH_FOR(dt)                                                \
  if (!kernels::gemm_avx2_path(dt))                                                   \
  GTEST_SKIP() << (dt).name() << " products do not take the AVX2 path at SIMD level " \
               << simd_level_name(simd_level())

// Sizes on both sides of the 6-row and 16-column micro-tile and of the cache blocks.
constexpr int64_t kOdd[] = {1, 3, 7, 17, 31, 65, 257};

// One operand: rows x cols, row-major (ld = cols + pad) or transposed (ld = rows + pad), the
// padding holding NaN so a stray read poisons the result. Values are fp32 in [-1, 1).
struct Matrix {
  std::vector<float> data;
  int64_t rs = 0, cs = 0;
};

Matrix make(int64_t rows, int64_t cols, bool transposed, int64_t pad, std::mt19937& rng) {
  Matrix m;
  const int64_t inner = transposed ? rows : cols, outer = transposed ? cols : rows;
  const int64_t ld = inner + pad;
  m.data.assign(outer * ld, std::numeric_limits<float>::quiet_NaN());
  m.rs = transposed ? 1 : ld;
  m.cs = transposed ? ld : 1;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) m.data[o * ld + j] = u(rng);
  return m;
}

// The matrix rounded to `dt` (bf16/f16 bits), and those bits widened back to fp32.
std::vector<uint16_t> narrow(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  convert_buffer(v.data(), kFloat32, out.data(), dt, static_cast<int64_t>(v.size()));
  return out;
}
std::vector<float> widen(const std::vector<uint16_t>& v, DType dt) {
  std::vector<float> out(v.size());
  convert_buffer(v.data(), dt, out.data(), kFloat32, static_cast<int64_t>(v.size()));
  return out;
}

struct Shape3 {
  int64_t M, N, K;
  bool a_t, b_t;
  int64_t pad;
  bool bias;
};

std::string describe(const Shape3& s) {
  return fmt::format("M {} N {} K {} a_t {} b_t {} pad {} bias {}", s.M, s.N, s.K, s.a_t, s.b_t,
                     s.pad, s.bias);
}

// The shapes every test below walks: all (M, N) pairs of kOdd, K cycling through kOdd and two
// values past one K block, every transposition, some padding and bias.
std::vector<Shape3> shapes() {
  std::vector<Shape3> out;
  int i = 0;
  for (int64_t M : kOdd)
    for (int64_t N : kOdd) {
      const int64_t K = i % 9 == 7 ? 513 : i % 9 == 8 ? 300 : kOdd[(i * 3 + 1) % 7];
      out.push_back({M, N, K, i % 2 == 1, i / 2 % 2 == 1, i % 3 == 0 ? 5 : 0, i % 4 < 2});
      ++i;
    }
  return out;
}

GemmArgs args(DType dt, DType out_dt, const Shape3& s, const void* a, const Matrix& am,
              const void* b, const Matrix& bm, const void* bias, void* c) {
  GemmArgs g;
  g.dtype = dt;
  g.out_dtype = out_dt;
  g.M = s.M;
  g.N = s.N;
  g.K = s.K;
  g.a = {a, am.rs, am.cs, nullptr};
  g.b = {b, bm.rs, bm.cs, nullptr};
  g.bias = bias;
  g.c = c;
  return g;
}

TEST(GemmNativeAvx2, F32MatchesTheReferenceGemm) {
  SKIP_WITHOUT_AVX2_PATH();
  std::mt19937 rng(11);
  for (const Shape3& s : shapes()) {
    const Matrix a = make(s.M, s.K, s.a_t, s.pad, rng), b = make(s.K, s.N, s.b_t, s.pad, rng);
    std::vector<float> bias(s.N);
    for (float& x : bias) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    std::vector<float> c(s.M * s.N);
    kernels::gemm_native(args(kFloat32, kFloat32, s, a.data.data(), a, b.data.data(), b,
                              s.bias ? bias.data() : nullptr, c.data()));

    // Reference: fp64 products (the NaN padding is never read: strides skip it).
    const std::vector<double> a64(a.data.begin(), a.data.end()), b64(b.data.begin(), b.data.end());
    std::vector<double> ref(s.M * s.N), mag(s.M * s.N);
    std::vector<double> a_abs(a64), b_abs(b64);
    for (double& x : a_abs) x = std::abs(x);
    for (double& x : b_abs) x = std::abs(x);
    const int64_t zero = 0;
    kernels::gemm_f64_batched(1, s.M, s.N, s.K, {a64.data(), a.rs, a.cs}, &zero,
                              {b64.data(), b.rs, b.cs}, &zero, ref.data());
    kernels::gemm_f64_batched(1, s.M, s.N, s.K, {a_abs.data(), a.rs, a.cs}, &zero,
                              {b_abs.data(), b.rs, b.cs}, &zero, mag.data());
    const double eps = std::numeric_limits<float>::epsilon();
    for (int64_t r = 0; r < s.M; ++r)
      for (int64_t j = 0; j < s.N; ++j) {
        const int64_t i = r * s.N + j;
        const double want = ref[i] + (s.bias ? bias[j] : 0.0);
        // fp32 reassociation: at most K roundings of partial sums bounded by sum |a||b|.
        const double tol = (s.K + 1) * eps * (mag[i] + (s.bias ? std::abs(bias[j]) : 0.0));
        ASSERT_NEAR(c[i], want, tol) << describe(s) << " at " << r << "," << j;
      }
  }
}

// An f32 A whose rows are contiguous in k is read in place by the kernel (rows a multiple of
// 4 KiB apart only on a CPU whose L1 has 12+ ways); one stored column by column is packed. The
// same values give the same bits every way, over one and several K blocks, with edge tiles,
// with and without a bias.
TEST(GemmNativeAvx2, AReadInPlaceGivesTheBitsOfThePackedA) {
  SKIP_WITHOUT_AVX2_PATH();
  std::mt19937 rng(17);
  for (const Shape3 s :
       {Shape3{37, 70, 300, false, false, 0, true}, Shape3{600, 40, 129, false, true, 0, false},
        Shape3{13, 33, 700, false, true, 0, true}}) {
    const Matrix b = make(s.K, s.N, s.b_t, 0, rng);
    Matrix direct = make(s.M, s.K, false, 3, rng);
    // The same values with rows 1024 floats apart, and stored column by column.
    Matrix apart, packed;
    apart.rs = 1024;
    apart.cs = 1;
    apart.data.assign(s.M * 1024, std::numeric_limits<float>::quiet_NaN());
    packed.rs = 1;
    packed.cs = s.M;
    packed.data.assign(s.M * s.K, 0.0f);
    for (int64_t r = 0; r < s.M; ++r)
      for (int64_t k = 0; k < s.K; ++k) {
        apart.data[r * 1024 + k] = direct.data[r * direct.rs + k];
        packed.data[k * s.M + r] = direct.data[r * direct.rs + k];
      }
    ASSERT_TRUE(kernels::avx2_reads_a_in_place(kFloat32, direct.rs, direct.cs));
    ASSERT_EQ(kernels::avx2_reads_a_in_place(kFloat32, apart.rs, apart.cs),
              cpu_identity().l1d_ways >= 12);
    ASSERT_FALSE(kernels::avx2_reads_a_in_place(kFloat32, packed.rs, packed.cs));
    std::vector<float> bias(s.N);
    for (float& x : bias) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    std::vector<float> want(s.M * s.N), got(s.M * s.N);
    kernels::gemm_native(args(kFloat32, kFloat32, s, packed.data.data(), packed, b.data.data(), b,
                              s.bias ? bias.data() : nullptr, want.data()));
    for (const Matrix* a : {&direct, &apart}) {
      kernels::gemm_native(args(kFloat32, kFloat32, s, a->data.data(), *a, b.data.data(), b,
                                s.bias ? bias.data() : nullptr, got.data()));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << describe(s) << " rows " << a->rs << " apart, at " << i;
    }
  }
}

// Pages of memory with an inaccessible page on each side, so any read outside [begin, end)
// faults.
class GuardedPages {
 public:
  explicit GuardedPages(size_t bytes) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = (bytes + page_ - 1) / page_ * page_;
    void* p = mmap(nullptr, size_ + 2 * page_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(p);
    if (mprotect(base_ + page_, size_, PROT_READ | PROT_WRITE) != 0)
      throw std::runtime_error("mprotect failed");
  }
  ~GuardedPages() { munmap(base_, size_ + 2 * page_); }
  GuardedPages(const GuardedPages&) = delete;
  GuardedPages& operator=(const GuardedPages&) = delete;
  char* begin() const { return base_ + page_; }
  char* end() const { return base_ + page_ + size_; }

 private:
  char* base_ = nullptr;
  size_t page_ = 0, size_ = 0;
};

// At SIMD level avx2 a bf16 A whose rows are contiguous in k is read in place too, each value
// widened from the 32 bits that end with it (gemm_kernel_f32_avx2.cpp): the same bits as the
// f32 product of the widened values, and no read outside A, which is put right after and right
// before an inaccessible page (its first value, whose 16 bits before it are not A's, is the
// first k step of the first tile; its last value ends the last row). Odd and even K, several K
// blocks, edge tiles, rows 4 KiB apart.
// Reads a bf16 A in place on every AVX2 CPU (by default only where the L1 has 12 ways or more,
// avx2_reads_a_in_place), then restores the default.
class Bf16AInPlaceForced {
 public:
  Bf16AInPlaceForced() { kernels::avx2_bf16_a_in_place_forced() = 1; }
  ~Bf16AInPlaceForced() { kernels::avx2_bf16_a_in_place_forced() = -1; }
};

TEST(GemmNativeAvx2, Bf16AIsReadInPlaceOnlyWithATwelveWayL1) {
  SKIP_WITHOUT_AVX2_PATH();
  EXPECT_EQ(kernels::avx2_reads_a_in_place(kBFloat16, 300, 1), cpu_identity().l1d_ways >= 12);
  EXPECT_TRUE(kernels::avx2_reads_a_in_place(kFloat32, 300, 1));
  Bf16AInPlaceForced forced;
  EXPECT_TRUE(kernels::avx2_reads_a_in_place(kBFloat16, 300, 1));
}

TEST(GemmNativeAvx2, Bf16AReadInPlaceGivesTheWidenedBitsAndStaysInsideA) {
  SKIP_WITHOUT_AVX2_PATH();
  Bf16AInPlaceForced forced;
  std::mt19937 rng(23);
  for (const Shape3 s :
       {Shape3{37, 70, 300, false, false, 0, true}, Shape3{600, 40, 129, false, true, 0, false},
        Shape3{13, 33, 513, false, true, 0, true}, Shape3{7, 48, 2048, false, false, 0, false}}) {
    const Matrix b = make(s.K, s.N, s.b_t, 0, rng);
    const std::vector<uint16_t> b_lo = narrow(b.data, kBFloat16);
    const std::vector<float> b_w = widen(b_lo, kBFloat16);
    std::vector<float> bias(s.N);
    for (float& x : bias) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    const std::vector<uint16_t> bias_lo = narrow(bias, kBFloat16);
    const std::vector<float> bias_w = widen(bias_lo, kBFloat16);
    for (const int64_t ld : {s.K, s.K + 3, int64_t{2048}}) {
      if (ld < s.K) continue;
      const Matrix a = make(s.M, s.K, false, ld - s.K, rng);
      const std::vector<uint16_t> a_lo = narrow(a.data, kBFloat16);
      const std::vector<float> a_w = widen(a_lo, kBFloat16);
      // A's used bytes end with the last row's K values: the padding after them is left out.
      const size_t used = sizeof(uint16_t) * static_cast<size_t>((s.M - 1) * ld + s.K);
      GuardedPages at_start(used), at_end(used);
      uint16_t* first = reinterpret_cast<uint16_t*>(at_start.begin());
      uint16_t* last = reinterpret_cast<uint16_t*>(at_end.end() - used);
      std::memcpy(first, a_lo.data(), used);
      std::memcpy(last, a_lo.data(), used);
      ASSERT_EQ(kernels::avx2_reads_a_in_place(kBFloat16, a.rs, a.cs),
                ld * 2 % 4096 != 0 || cpu_identity().l1d_ways >= 12);
      std::vector<float> want(s.M * s.N), got(s.M * s.N);
      kernels::gemm_native(args(kFloat32, kFloat32, s, a_w.data(), a, b_w.data(), b,
                                s.bias ? bias_w.data() : nullptr, want.data()));
      for (const uint16_t* a_at :
           {static_cast<const uint16_t*>(first), static_cast<const uint16_t*>(last)}) {
        kernels::gemm_native(args(kBFloat16, kFloat32, s, a_at, a, b_lo.data(), b,
                                  s.bias ? bias_lo.data() : nullptr, got.data()));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << describe(s) << " ld " << ld << (a_at == first ? " at the start" : " at the end")
              << ", at " << i;
      }
    }
  }
}

// A tall product with a transposed A and no bias is computed mirrored (C^T = B^T A^T, then
// transposed: gemm_native_avx2.cpp); with a bias of zeros it is not. Both give the same bits,
// for f32 and for widened bf16 operands, including past one K block.
TEST(GemmNativeAvx2, TallTransposedAProductMirroredGivesTheSameBits) {
  SKIP_WITHOUT_AVX2_PATH();
  std::mt19937 rng(5);
  for (const Shape3 s :
       {Shape3{200, 48, 300, true, false, 3, false}, Shape3{1024, 256, 64, true, false, 0, false},
        Shape3{97, 16, 513, true, true, 0, false}}) {
    const Matrix a = make(s.M, s.K, s.a_t, s.pad, rng), b = make(s.K, s.N, s.b_t, s.pad, rng);
    const std::vector<float> zeros(s.N, 0.0f);
    std::vector<float> mirrored(s.M * s.N), direct(s.M * s.N);
    kernels::gemm_native(
        args(kFloat32, kFloat32, s, a.data.data(), a, b.data.data(), b, nullptr, mirrored.data()));
    kernels::gemm_native(args(kFloat32, kFloat32, s, a.data.data(), a, b.data.data(), b,
                              zeros.data(), direct.data()));
    for (size_t i = 0; i < direct.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(mirrored[i]), std::bit_cast<uint32_t>(direct[i]))
          << describe(s) << " at " << i;
    const std::vector<uint16_t> a_lo = narrow(a.data, kBFloat16), b_lo = narrow(b.data, kBFloat16);
    const std::vector<uint16_t> zeros_lo(s.N, 0);
    kernels::gemm_native(
        args(kBFloat16, kFloat32, s, a_lo.data(), a, b_lo.data(), b, nullptr, mirrored.data()));
    kernels::gemm_native(args(kBFloat16, kFloat32, s, a_lo.data(), a, b_lo.data(), b,
                              zeros_lo.data(), direct.data()));
    for (size_t i = 0; i < direct.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(mirrored[i]), std::bit_cast<uint32_t>(direct[i]))
          << "bf16 " << describe(s) << " at " << i;
  }
}

// Low-precision operands: the same bits as the fp32 GEMM of their widenings; a low-precision
// output is that fp32 result rounded once (RNE). At the AVX-512 levels, where f32 products run
// on the AVX-512 kernel, the products the narrow dot-product kernel takes (N <= 16, A's rows
// contiguous in k; its own lane order, test_gemm_narrow_avx2.cpp) are left out: every other
// shape is one FMA chain per element on the 6x32 tile and on the AVX-512 f32 kernel alike.
void check_widening(DType dt, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Shape3& s : shapes()) {
    const Matrix a = make(s.M, s.K, s.a_t, s.pad, rng), b = make(s.K, s.N, s.b_t, s.pad, rng);
    if (!kernels::gemm_avx2_path(kFloat32) && s.N <= kernels::kAvx2NarrowMaxN && a.cs == 1)
      continue;
    std::vector<float> bias(s.N);
    for (float& x : bias) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    const std::vector<uint16_t> a_lo = narrow(a.data, dt), b_lo = narrow(b.data, dt);
    const std::vector<uint16_t> bias_lo = narrow(bias, dt);
    const std::vector<float> a_w = widen(a_lo, dt), b_w = widen(b_lo, dt),
                             bias_w = widen(bias_lo, dt);

    std::vector<float> want(s.M * s.N), got(s.M * s.N);
    kernels::gemm_native(args(kFloat32, kFloat32, s, a_w.data(), a, b_w.data(), b,
                              s.bias ? bias_w.data() : nullptr, want.data()));
    kernels::gemm_native(args(dt, kFloat32, s, a_lo.data(), a, b_lo.data(), b,
                              s.bias ? bias_lo.data() : nullptr, got.data()));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << dt.name() << " " << describe(s) << " at " << i;

    std::vector<uint16_t> got_lo(s.M * s.N);
    kernels::gemm_native(args(dt, dt, s, a_lo.data(), a, b_lo.data(), b,
                              s.bias ? bias_lo.data() : nullptr, got_lo.data()));
    EXPECT_EQ(got_lo, narrow(want, dt)) << dt.name() << " output, " << describe(s);

    // round_to: fp32 output holding exactly that rounded result (the tall transposed-A shapes
    // without bias take the mirrored product, the others the tiles over K blocks and edges).
    GemmArgs g = args(dt, kFloat32, s, a_lo.data(), a, b_lo.data(), b,
                      s.bias ? bias_lo.data() : nullptr, got.data());
    g.round_to = dt;
    kernels::gemm_native(g);
    const std::vector<float> rounded = widen(narrow(want, dt), dt);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(rounded[i]))
          << dt.name() << " rounded into f32, " << describe(s) << " at " << i;
  }
}

TEST(GemmNativeAvx2, Bf16OperandsGiveTheBitsOfTheWidenedF32Gemm) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kBFloat16);
  check_widening(kBFloat16, 21);
}

TEST(GemmNativeAvx2, F16OperandsGiveTheBitsOfTheWidenedF32Gemm) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kFloat16);
  check_widening(kFloat16, 31);
}

TEST(GemmNativeAvx2, F16SpecialValuesWidenExactly) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kFloat16);
  // Subnormal, largest finite and infinite f16 operands: widening is exact, so 1 x each is
  // each (and one f16 output rounds back to the same bits). Sums start from +0, so -0 x 1
  // gives +0, as in any GEMM.
  const std::vector<uint16_t> b = {0x0001, 0x03ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x3c00};
  const uint16_t one = 0x3c00;
  std::vector<uint16_t> out(b.size());
  GemmArgs g;
  g.dtype = g.out_dtype = kFloat16;
  g.M = 1;
  g.N = static_cast<int64_t>(b.size());
  g.K = 1;
  g.a = {&one, 1, 1, nullptr};
  g.b = {b.data(), g.N, 1, nullptr};
  g.c = out.data();
  kernels::gemm_native(g);
  EXPECT_EQ(out, b);
  const uint16_t negative_zero = 0x8000;
  g.b = {&negative_zero, 1, 1, nullptr};
  g.N = 1;
  kernels::gemm_native(g);
  EXPECT_EQ(out[0], 0x0000);
}

// The 1 x 1 x 1 product x * x into y.
GemmArgs one_by_one(DType dt, DType out_dt, const void* x, void* y) {
  GemmArgs g;
  g.dtype = dt;
  g.out_dtype = out_dt;
  g.M = g.N = g.K = 1;
  g.a = {x, 1, 1, nullptr};
  g.b = {x, 1, 1, nullptr};
  g.c = y;
  return g;
}

TEST(GemmNativeAvx2, RejectsAMixedOutputDtype) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kFloat16);
  const uint16_t x = 0x3c00;
  uint16_t y = 0;
  const GemmArgs g = one_by_one(kFloat16, kBFloat16, &x, &y);
  testing::expect_error([&] { kernels::gemm_native(g); }, {"gemm_native", "float16", "bfloat16"});
}

TEST(GemmNativeAvx2, RoundToNeedsTheAvx2PathAndAnF32Output) {
  const uint16_t x = 0x3f80;  // bf16 1.0
  float y = 0.0f;
  GemmArgs g = one_by_one(kBFloat16, kFloat32, &x, &y);
  g.round_to = kBFloat16;
  // bf16 takes the AVX2 path at level avx2 and at level avx512 (AVX-512 without BF16), f16 at
  // every level, f32 only at level avx2.
  const SimdLevel level = simd_level();
  EXPECT_EQ(kernels::gemm_avx2_path(kBFloat16),
            level == SimdLevel::kAvx2 || level == SimdLevel::kAvx512);
  EXPECT_EQ(kernels::gemm_avx2_path(kFloat16), level >= SimdLevel::kAvx2);
  EXPECT_EQ(kernels::gemm_avx2_path(kFloat32), level == SimdLevel::kAvx2);
  if (!kernels::gemm_avx2_path(kBFloat16)) {
    if (kernels::gemm_native_supported(kBFloat16))
      testing::expect_error([&] { kernels::gemm_native(g); }, {"gemm_native", "round"});
    GTEST_SKIP() << "round_to runs only on the AVX2 path (this CPU is at "
                 << simd_level_name(simd_level()) << ")";
  }
  kernels::gemm_native(g);
  EXPECT_EQ(y, 1.0f);
  uint16_t narrow_out = 0;
  g.out_dtype = kBFloat16;
  g.c = &narrow_out;
  testing::expect_error([&] { kernels::gemm_native(g); }, {"gemm_native", "round"});
}

// Sets the backend for one test and restores the previous one.
class BackendGuard {
 public:
  explicit BackendGuard(GemmBackend b) : before_(kernels::gemm_backend()) {
    kernels::set_gemm_backend(b);
  }
  ~BackendGuard() { kernels::set_gemm_backend(before_); }

 private:
  GemmBackend before_;
};

TEST(GemmNativeAvx2, AutoChoosesByDtypeShapeAndLayout) {
  SKIP_WITHOUT_AVX2_PATH();
  BackendGuard g(GemmBackend::kAuto);
  // Without AVX-512 oneDNN has no bf16/f16 kernels: the alternative is a widening pass, so
  // low-precision products run natively unless the 6x16 tile would be mostly padding (narrow
  // products with A not transposed have their own kernel: test_gemm_narrow_avx2.cpp).
  EXPECT_TRUE(kernels::use_native_gemm(kBFloat16, 1, 256, 1024, 784));
  EXPECT_TRUE(kernels::use_native_gemm(kFloat16, 1, 256, 784, 1024, true));
  EXPECT_FALSE(kernels::use_native_gemm(kBFloat16, 1, 256, 10, 1024, true));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat16, 1, 10, 1024, 256, true));
  // f32: the weight gradients (A transposed) natively, forward shapes on oneDNN.
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 1024, 784, 256, true));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 1024, 784, false));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 10, 1024, 256, true));
  // The tall GPT MLP weight gradient (1024 x 256 over 2048 tokens) too, but not the 768-row
  // one beside it, nor the same shape untransposed.
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 1024, 256, 2048, true));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 768, 256, 2048, true));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 1024, 256, 2048, false));
  // The MLP's 1024 -> 1024 input gradient (N = K = 1024) natively, the 784 -> 1024 one not.
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 256, 1024, 1024, false));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 784, 1024, false));
  // An A the kernel reads in place (rows contiguous in k, 4 KiB apart only with a 12-way L1):
  // a Linear's forward x W^T and input gradient dY W natively, whatever their width (with K of
  // 512 or more on L1s of fewer ways); not below the smallest side.
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 256, 1024, 784, false, 784));
  // ... with a short K (the ViT's 128-wide rows) only where the L1 has 12 ways or more.
  EXPECT_EQ(kernels::use_native_gemm(kFloat32, 1, 4352, 128, 128, false, 128),
            cpu_identity().l1d_ways >= 12);
  EXPECT_EQ(kernels::use_native_gemm(kFloat32, 1, 2048, 1024, 256, false, 256),
            cpu_identity().l1d_ways >= 12);
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 2048, 256, 768, false, 768));
  EXPECT_EQ(kernels::use_native_gemm(kFloat32, 1, 256, 784, 1024, false, 1024),
            cpu_identity().l1d_ways >= 12);
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 32, 784, false, 784));
  {
    BackendGuard forced(GemmBackend::kOnednn);
    EXPECT_FALSE(kernels::use_native_gemm(kFloat16, 1, 256, 1024, 784));
  }
  BackendGuard forced(GemmBackend::kNative);
  EXPECT_TRUE(kernels::use_native_gemm(kFloat32, 1, 256, 10, 784));
}

// matmul and linear on bf16/f16 tensors: native (auto) and the oneDNN route (widen, fp32
// oneDNN, round once) give the same value up to fp32 reassociation before the one rounding,
// and native gives exactly the fp32 native GEMM of the widened tensors, rounded.
TEST(GemmNativeAvx2, MatmulOnLowPrecisionTensorsIsTheRoundedF32Product) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kBFloat16);
  SKIP_WITHOUT_AVX2_PATH_FOR(kFloat16);
  NoGradGuard no_grad;
  for (DType dt : {kBFloat16, kFloat16}) {
    const Tensor x = testing::rnd({65, 257}, dt, 3), w = testing::rnd({31, 257}, dt, 4);
    const Tensor bias = testing::rnd({31}, dt, 5);
    Tensor native, native_f32, onednn;
    {
      BackendGuard g(GemmBackend::kNative);
      native = nn::functional::linear(x, w, bias);
      native_f32 = nn::functional::linear(x.to(kFloat32), w.to(kFloat32), bias.to(kFloat32));
    }
    {
      BackendGuard g(GemmBackend::kOnednn);
      onednn = nn::functional::linear(x, w, bias);
    }
    EXPECT_EQ(native.dtype(), dt);
    EXPECT_EQ(testing::vals(native), testing::vals(native_f32.to(dt))) << dt.name();
    // One rounding of values that differ by reassociation only: at most one ulp of dt apart.
    const std::vector<double> n = testing::vals(native), o = testing::vals(onednn);
    const double ulp = dt == kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    for (size_t i = 0; i < n.size(); ++i)
      ASSERT_LE(std::abs(n[i] - o[i]), ulp * std::max(std::abs(o[i]), 1e-2)) << dt.name() << i;
  }
}

}  // namespace
}  // namespace mantissa
