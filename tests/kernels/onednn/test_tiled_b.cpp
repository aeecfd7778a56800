// oneDNN's tiled B layout (kernels/cpu/onednn/onednn_matmul.h) and its packer: every element
// lands where the layout's formula puts it, the padding is zero, the AVX-512 packer equals the
// scalar one, and a product on a packed B equals oneDNN's product on the plain B bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cpu/onednn/tiled_b_pack.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa::kernels {
namespace {

// Packs a rows x cols bf16 matrix (random bits, no NaN) into the layout with `pack`.
std::vector<uint16_t> packed(const std::vector<uint16_t>& src, int64_t rows, int64_t cols,
                             const Bf16TiledB& t, decltype(&pack_bf16_k_tile) pack) {
  std::vector<uint16_t> b(static_cast<size_t>(t.elements), 0xFFFF);  // sentinel: NaN bits
  for (int64_t kt = 0; kt < t.k_tiles; ++kt) {
    const int64_t r0 = kt * Bf16TiledB::kTileK;
    const int64_t n = std::clamp<int64_t>(rows - r0, 0, Bf16TiledB::kTileK);
    pack(src.data() + r0 * cols, cols, n, cols, t, kt, b.data());
  }
  return b;
}

TEST(TiledB, PackerPutsEveryElementWhereTheLayoutSays) {
  if (!has_native_bf16()) GTEST_SKIP() << "no AVX-512 BF16 or AMX: oneDNN uses no tiled B here";
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 1024, 784}, {16, 70, 150}, {256, 768, 256}}) {
    const auto layout = onednn_bf16_tiled_b_layout(m, k, n);
    if (!layout) continue;  // oneDNN chose another layout for this shape
    const Bf16TiledB& t = *layout;
    EXPECT_EQ(t.k_tiles, (k + 31) / 32);
    EXPECT_EQ(t.n_tiles, (n + 63) / 64);
    std::mt19937 rng(static_cast<unsigned>(k + n));
    std::vector<uint16_t> src(static_cast<size_t>(k * n));
    for (auto& v : src) v = static_cast<uint16_t>(rng() & 0x7F7F);
    const auto fast = packed(src, k, n, t, pack_bf16_k_tile);
    const auto slow = packed(src, k, n, t, pack_bf16_k_tile_scalar);
    ASSERT_EQ(fast, slow) << k << " x " << n;
    for (int64_t r = 0; r < t.k_tiles * 32; ++r)
      for (int64_t c = 0; c < t.n_tiles * 64; ++c) {
        const int64_t off = (r / 32) * t.k_tile_stride + (c / 64) * t.n_tile_stride +
                            ((r % 32) / 2) * 128 + (c % 64) * 2 + r % 2;
        const uint16_t want = r < k && c < n ? src[r * n + c] : 0;
        ASSERT_EQ(fast[off], want) << r << ", " << c;
      }
  }
}

// B = R^T packed from R's rows (the forward's weight), 64 rows of R per n tile.
TEST(TiledB, TransposedPackerPutsEveryElementWhereTheLayoutSays) {
  if (!has_native_bf16()) GTEST_SKIP() << "no AVX-512 BF16 or AMX: oneDNN uses no tiled B here";
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 784, 1024}, {16, 70, 150}, {256, 256, 768}}) {
    const auto layout = onednn_bf16_tiled_b_layout(m, k, n);
    if (!layout) continue;
    const Bf16TiledB& t = *layout;
    std::mt19937 rng(static_cast<unsigned>(3 * k + n));
    std::vector<uint16_t> r(static_cast<size_t>(n * k));  // R: n rows of k
    for (auto& v : r) v = static_cast<uint16_t>(rng() & 0x7F7F);
    std::vector<uint16_t> fast(static_cast<size_t>(t.elements), 0xFFFF), slow = fast;
    for (int64_t nt = 0; nt < t.n_tiles; ++nt) {
      const int64_t r0 = nt * Bf16TiledB::kTileN;
      const int64_t rows = std::clamp<int64_t>(n - r0, 0, Bf16TiledB::kTileN);
      pack_bf16_n_tile_transposed(r.data() + r0 * k, k, rows, k, t, nt, fast.data());
      pack_bf16_n_tile_transposed_scalar(r.data() + r0 * k, k, rows, k, t, nt, slow.data());
    }
    ASSERT_EQ(fast, slow) << k << " x " << n;
    for (int64_t kk = 0; kk < t.k_tiles * 32; ++kk)
      for (int64_t c = 0; c < t.n_tiles * 64; ++c) {
        const int64_t off = (kk / 32) * t.k_tile_stride + (c / 64) * t.n_tile_stride +
                            ((kk % 32) / 2) * 128 + (c % 64) * 2 + kk % 2;
        const uint16_t want = kk < k && c < n ? r[c * k + kk] : 0;
        ASSERT_EQ(fast[off], want) << kk << ", " << c;
      }
  }
}

TEST(TiledB, ProductOnPackedOperandEqualsPlainProduct) {
  if (!has_native_bf16()) GTEST_SKIP() << "no AVX-512 BF16 or AMX: oneDNN uses no tiled B here";
  const int64_t m = 64, k = 1024, n = 784;
  const auto layout = onednn_bf16_tiled_b_layout(m, k, n);
  ASSERT_TRUE(layout.has_value()) << "oneDNN no longer picks the 32 x 64 tiles on this CPU";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  auto bf16 = [&] {
    const float f = normal(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  };
  std::vector<uint16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (auto& v : a) v = bf16();
  for (auto& v : b) v = bf16();
  const auto tiles = packed(b, k, n, *layout, pack_bf16_k_tile);
  std::vector<float> got(static_cast<size_t>(m * n)), want(got.size());
  onednn_matmul_bf16_tiled_b(a.data(), tiles.data(), m, k, n, got.data(), kFloat32);
  const MatmulOperand ao{a.data(), {m, k}, {k, 1}}, bo{b.data(), {k, n}, {n, 1}};
  onednn_matmul(kBFloat16, ao, bo, nullptr, kBFloat16, want.data(), {m, n}, kFloat32);
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

}  // namespace
}  // namespace mantissa::kernels
