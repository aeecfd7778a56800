// The native GEMM (kernels/cpu/gemm/gemm_native.h) against an fp64 reference, on whichever path
// the CPU runs (AVX-512 14x32 tiles, or AVX2 6x16 tiles with bf16 widened while packed; the
// AVX2-only cases are in test_gemm_native_avx2.cpp): edge sizes around the micro-tile and the cache
// blocks, every transposition, padded strides, batches with a broadcast operand, fused bias, odd K
// for bf16 and K spanning several K blocks. bf16 operands are small multiples of 1/8, so every
// product and partial sum is exact in fp32 and the results can be compared exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using kernels::GemmArgs;
using kernels::GemmBackend;

constexpr int64_t kSizes[] = {1, 2, 15, 16, 17, 31, 33, 65, 129, 300};

// A batch of rows x cols matrices in one buffer: row-major or transposed, optionally with 3
// padding elements after each row (or column) that hold NaN, so reading them poisons a result.
template <typename T>
struct Operand {
  std::vector<T> data;
  int64_t rs = 0, cs = 0;
  std::vector<int64_t> offsets;

  double at(int64_t i, int64_t r, int64_t c) const {
    const T v = data[offsets[i] + r * rs + c * cs];
    if constexpr (sizeof(T) == 2) {
      return bf16_bits_to_float(v);
    } else {
      return v;
    }
  }
};

template <typename T>
T from_double(double v) {
  if constexpr (sizeof(T) == 2) {
    return float_to_bf16_bits(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// f32: uniform in [-1, 1); bf16: k/8 for integer k in [-8, 8].
template <typename T>
double draw(std::mt19937& rng) {
  if constexpr (sizeof(T) == 2) {
    return static_cast<double>(std::uniform_int_distribution<int>(-8, 8)(rng)) / 8.0;
  } else {
    return std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
  }
}

template <typename T>
Operand<T> make(int64_t batch, int64_t rows, int64_t cols, bool transposed, bool padded,
                bool broadcast, std::mt19937& rng) {
  Operand<T> op;
  const int64_t inner = transposed ? rows : cols, outer = transposed ? cols : rows;
  const int64_t ld = inner + (padded ? 3 : 0);
  const int64_t entries = broadcast ? 1 : batch;
  op.data.assign(entries * outer * ld, from_double<T>(std::numeric_limits<double>::quiet_NaN()));
  op.rs = transposed ? 1 : ld;
  op.cs = transposed ? ld : 1;
  for (int64_t i = 0; i < batch; ++i) op.offsets.push_back(broadcast ? 0 : i * outer * ld);
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j)
        op.data[(e * outer + o) * ld + j] = from_double<T>(draw<T>(rng));
  return op;
}

struct Case {
  int64_t batch = 1, M = 1, N = 1, K = 1;
  bool a_t = false, b_t = false, padded = false, bias = false, broadcast_b = false;
  DType out = kFloat32;
};

std::string describe(const Case& c) {
  return fmt::format(
      "batch {} M {} N {} K {} a_t {} b_t {} padded {} bias {} broadcast_b {} out {}", c.batch, c.M,
      c.N, c.K, c.a_t, c.b_t, c.padded, c.bias, c.broadcast_b, c.out.name());
}

// Runs one case and checks every element against the fp64 reference: f32 within
// 2 K eps sum|a||b|; bf16 operands exactly (fp32 out) or as the RNE rounding of the exact
// value (bf16 out).
template <typename T>
void check_case(const Case& c, uint32_t seed) {
  constexpr bool kBf16 = sizeof(T) == 2;
  std::mt19937 rng(seed);
  const Operand<T> a = make<T>(c.batch, c.M, c.K, c.a_t, c.padded, false, rng);
  const Operand<T> b = make<T>(c.batch, c.K, c.N, c.b_t, c.padded, c.broadcast_b, rng);
  std::vector<T> bias;
  for (int64_t j = 0; c.bias && j < c.N; ++j) bias.push_back(from_double<T>(draw<T>(rng)));
  const int64_t count = c.batch * c.M * c.N;
  std::vector<float> out_f32(c.out == kFloat32 ? count : 0);
  std::vector<uint16_t> out_bf16(c.out == kBFloat16 ? count : 0);

  GemmArgs g;
  g.dtype = kBf16 ? kBFloat16 : kFloat32;
  g.out_dtype = c.out;
  g.batch = c.batch;
  g.M = c.M;
  g.N = c.N;
  g.K = c.K;
  g.a = {a.data.data(), a.rs, a.cs, a.offsets.data()};
  g.b = {b.data.data(), b.rs, b.cs, b.offsets.data()};
  g.bias = c.bias ? bias.data() : nullptr;
  g.c = c.out == kFloat32 ? static_cast<void*>(out_f32.data()) : out_bf16.data();
  kernels::gemm_native(g);

  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t r = 0; r < c.M; ++r)
      for (int64_t col = 0; col < c.N; ++col) {
        double want = c.bias ? (kBf16 ? bf16_bits_to_float(bias[col]) : bias[col]) : 0.0;
        double mag = std::abs(want);
        for (int64_t k = 0; k < c.K; ++k) {
          want += a.at(i, r, k) * b.at(i, k, col);
          mag += std::abs(a.at(i, r, k) * b.at(i, k, col));
        }
        const int64_t idx = (i * c.M + r) * c.N + col;
        if (c.out == kBFloat16) {
          ASSERT_EQ(out_bf16[idx], float_to_bf16_bits(static_cast<float>(want)))
              << describe(c) << " at " << i << "," << r << "," << col;
        } else if (kBf16) {
          ASSERT_EQ(out_f32[idx], want) << describe(c) << " at " << i << "," << r << "," << col;
        } else {
          ASSERT_NEAR(out_f32[idx], want, 2.0 * c.K * eps * mag)
              << describe(c) << " at " << i << "," << r << "," << col;
        }
      }
}

// Every (M, N) pair of kSizes, K drawn from kSizes too, cycling through the transposition
// combinations, padding, bias and batches.
std::vector<Case> edge_cases(DType out) {
  std::vector<Case> cases;
  int idx = 0;
  for (int64_t M : kSizes)
    for (int64_t N : kSizes) {
      Case c;
      c.M = M;
      c.N = N;
      c.K = kSizes[(idx * 7 + 3) % 10];
      c.a_t = idx % 2 == 1;
      c.b_t = idx / 2 % 2 == 1;
      c.padded = idx % 3 == 0;
      c.bias = idx % 5 < 2;
      c.batch = idx % 11 == 0 ? 3 : 1;
      c.broadcast_b = idx % 22 == 0;
      c.out = out;
      cases.push_back(c);
      ++idx;
    }
  return cases;
}

// K beyond one K block (512 f32, 1024 bf16 values): partial sums continue across blocks.
std::vector<Case> long_k_cases(DType out) {
  Case a;
  a.M = 45;
  a.N = 70;
  a.K = 1301;
  a.bias = true;
  a.out = out;
  Case b = a;
  b.a_t = b.b_t = b.padded = true;
  b.batch = 2;
  b.K = 2049;
  return {a, b};
}

#define SKIP_WITHOUT(dtype)                                                                 \
  if (!kernels::gemm_native_supported(dtype))                                               \
  GTEST_SKIP() << "this CPU lacks " << ((dtype) == kBFloat16 ? "AVX-512 BF16" : "AVX-512F") \
               << " (and AVX2+FMA+F16C): the native " << (dtype).name()                     \
               << " GEMM does not run here"

TEST(GemmNative, F32EdgeShapesMatchFp64Reference) {
  SKIP_WITHOUT(kFloat32);
  uint32_t seed = 1;
  for (const Case& c : edge_cases(kFloat32)) check_case<float>(c, seed++);
  for (const Case& c : long_k_cases(kFloat32)) check_case<float>(c, seed++);
}

TEST(GemmNative, Bf16EdgeShapesAreExactWithF32Output) {
  SKIP_WITHOUT(kBFloat16);
  uint32_t seed = 100;
  for (const Case& c : edge_cases(kFloat32)) check_case<uint16_t>(c, seed++);
  for (const Case& c : long_k_cases(kFloat32)) check_case<uint16_t>(c, seed++);
}

TEST(GemmNative, Bf16OutputIsTheExactSumRoundedOnce) {
  SKIP_WITHOUT(kBFloat16);
  uint32_t seed = 200;
  for (const Case& c : edge_cases(kBFloat16)) check_case<uint16_t>(c, seed++);
  for (const Case& c : long_k_cases(kBFloat16)) check_case<uint16_t>(c, seed++);
}

TEST(GemmNative, OddKIsZeroPaddedForBf16Pairs) {
  SKIP_WITHOUT(kBFloat16);
  for (int64_t K : {1, 3, 17, 1025}) {
    Case c;
    c.M = 15;
    c.N = 33;
    c.K = K;
    c.a_t = K % 2 == 1;
    check_case<uint16_t>(c, static_cast<uint32_t>(K));
  }
}

TEST(GemmNative, RejectsUnsupportedOutputAndSizes) {
  SKIP_WITHOUT(kFloat32);
  float x = 1.0f, y = 0.0f;
  GemmArgs g;
  g.M = g.N = g.K = 1;
  g.a = {&x, 1, 1, nullptr};
  g.b = {&x, 1, 1, nullptr};
  g.c = &y;
  g.out_dtype = kBFloat16;
  testing::expect_error([&] { kernels::gemm_native(g); }, {"gemm_native", "float32", "bfloat16"});
  g.out_dtype = kFloat32;
  g.K = 0;
  testing::expect_error([&] { kernels::gemm_native(g); }, "positive sizes");
  g.K = 1;
  kernels::gemm_native(g);
  EXPECT_EQ(y, 1.0f);
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

TEST(GemmBackend, ParsesTheEnvironmentValues) {
  EXPECT_EQ(kernels::parse_gemm_backend(""), GemmBackend::kAuto);
  EXPECT_EQ(kernels::parse_gemm_backend("auto"), GemmBackend::kAuto);
  EXPECT_EQ(kernels::parse_gemm_backend("Native"), GemmBackend::kNative);
  EXPECT_EQ(kernels::parse_gemm_backend("onednn"), GemmBackend::kOnednn);
  testing::expect_error([] { kernels::parse_gemm_backend("blas"); },
                        {"MANTISSA_GEMM", "'blas'", "auto, native, onednn"});
  EXPECT_STREQ(kernels::gemm_backend_name(GemmBackend::kOnednn), "onednn");
}

TEST(GemmBackend, OverrideChoosesThePath) {
  {
    BackendGuard g(GemmBackend::kOnednn);
    EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 512, 512, 512));
    EXPECT_FALSE(kernels::use_native_gemm(kBFloat16, 1, 512, 512, 512));
  }
  BackendGuard g(GemmBackend::kNative);
  EXPECT_EQ(kernels::use_native_gemm(kFloat32, 1, 2, 3, 4),
            kernels::gemm_native_supported(kFloat32));
  EXPECT_EQ(kernels::use_native_gemm(kBFloat16, 1, 2, 3, 4),
            kernels::gemm_native_supported(kBFloat16));
  EXPECT_EQ(kernels::use_native_gemm(kFloat16, 1, 512, 512, 512),
            kernels::gemm_native_supported(kFloat16));
}

// a @ b through mantissa::matmul under `backend`.
Tensor matmul_with(GemmBackend backend, const Tensor& a, const Tensor& b) {
  BackendGuard g(backend);
  NoGradGuard no_grad;
  return matmul(a, b);
}

// bf16 operands exact as above, as tensors.
Tensor exact_bf16(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(numel_of(s));
  for (float& x : v) x = static_cast<float>(draw<uint16_t>(rng));
  return tensor(v, s).to(kBFloat16);
}

TEST(GemmNative, MatmulRoutesToTheSameBitsAsADirectCall) {
  for (DType dt : {kFloat32, kBFloat16}) {
    if (!kernels::gemm_native_supported(dt)) continue;
    // a is a transposed view with a batch, so matmul takes its batched path in place.
    const Tensor a = testing::rnd({2, 40, 67}, dt, 1).transpose(-1, -2);  // [2, 67, 40]
    const Tensor b = testing::rnd({40, 35}, dt, 2);
    const Tensor c = matmul_with(GemmBackend::kNative, a, b);
    std::vector<int64_t> a_off{0, 40 * 67}, b_off{0, 0};
    std::vector<uint16_t> raw(2 * 67 * 35 * 2);
    GemmArgs g;
    g.dtype = g.out_dtype = dt;
    g.batch = 2;
    g.M = 67;
    g.N = 35;
    g.K = 40;
    g.a = {a.data_ptr(), a.stride(-2), a.stride(-1), a_off.data()};
    g.b = {b.data_ptr(), b.stride(-2), b.stride(-1), b_off.data()};
    g.c = raw.data();
    kernels::gemm_native(g);
    const Tensor direct = from_buffer(raw.data(), dt, {2, 67, 35});
    EXPECT_EQ(testing::vals(c), testing::vals(direct)) << dt.name();
  }
}

TEST(GemmNative, LinearLayoutsAgreeWithOnednnAndAreRepeatable) {
  for (DType dt : {kFloat32, kBFloat16}) {
    if (!kernels::gemm_native_supported(dt)) continue;
    const Tensor x = exact_bf16({129, 300}, 3).to(dt), w = exact_bf16({65, 300}, 4).to(dt);
    const Tensor dy = exact_bf16({129, 65}, 5).to(dt);
    // Forward x W^T, input grad dY W, weight grad dY^T x: exact sums, so both backends agree
    // to the bit (the results are within bf16 range and rounded once from the same value).
    for (auto [a, b] : {std::pair{x, w.t()}, std::pair{dy, w}, std::pair{dy.t(), x}}) {
      const Tensor native = matmul_with(GemmBackend::kNative, a, b);
      const Tensor onednn = matmul_with(GemmBackend::kOnednn, a, b);
      EXPECT_EQ(testing::vals(native), testing::vals(onednn)) << dt.name();
      EXPECT_EQ(testing::vals(native), testing::vals(matmul_with(GemmBackend::kNative, a, b)));
    }
  }
}

TEST(GemmNative, LinearWithBiasMatchesFp64) {
  if (!kernels::gemm_native_supported(kFloat32)) GTEST_SKIP() << "this CPU lacks AVX-512F";
  BackendGuard g(GemmBackend::kNative);
  NoGradGuard no_grad;
  const Tensor x = testing::rnd({31, 129}, kFloat32, 6), w = testing::rnd({17, 129}, kFloat32, 7);
  const Tensor bias = testing::rnd({17}, kFloat32, 8);
  const Tensor y = nn::functional::linear(x, w, bias);
  const Tensor want = nn::functional::linear(x.to(kFloat64), w.to(kFloat64), bias.to(kFloat64));
  testing::expect_near_all(testing::vals(y), testing::vals(want), 1e-4);
}

TEST(GemmNative, SameBitsWithOneTwoAndThreeThreads) {
#ifdef _OPENMP
  // The thread count changes how the rows are split among tasks (the AVX2 driver cuts M into
  // chunks that need not align with its cache blocks); the bits must not change. bf16 results
  // are summed over several K blocks in fp32 partials before their one rounding. On the AVX2
  // path 1000 x 100 x 300 keeps all of N in one block on 1, 2 and 3 threads (a tall product
  // with a small B), 600 x 300 x 200 (K past one block) on 1 and 2 threads and not on 3.
  const int64_t shapes[][3] = {{300, 1100, 129}, {37, 300, 29},    {65, 513, 257},
                               {7, 600, 40},     {1000, 100, 300}, {600, 300, 200}};
  for (DType dt : {kFloat32, kBFloat16}) {
    if (!kernels::gemm_native_supported(dt)) continue;
    for (const auto& s : shapes) {
      const Tensor a = testing::rnd({s[0], s[1]}, dt, 9), b = testing::rnd({s[1], s[2]}, dt, 10);
      const int before = omp_get_max_threads();
      omp_set_num_threads(1);
      const std::vector<double> one = testing::vals(matmul_with(GemmBackend::kNative, a, b));
      for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        const std::vector<double> many = testing::vals(matmul_with(GemmBackend::kNative, a, b));
        EXPECT_EQ(one, many) << dt.name() << " " << s[0] << "x" << s[1] << "x" << s[2] << ", "
                             << threads << " threads";
      }
      omp_set_num_threads(before);
    }
  }
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

}  // namespace
}  // namespace mantissa
