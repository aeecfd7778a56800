#pragma once
// mantissa's own GEMM (fp32 accumulation), BLIS-style: operands are packed into
// register-blocked panels, a micro-kernel keeps its C tile in registers across a whole K block.
// Two paths: AVX-512 (f32 and bf16, 14x32 tiles, VDPBF16PS for bf16) and AVX2+FMA+F16C
// (f32, bf16 and f16, 6x16 tiles, or 6x32 zmm tiles for bf16/f16 on CPUs with AVX-512;
// bf16/f16 operands are widened to fp32 while packed, so they cost no separate conversion
// pass; gemm_avx2_impl.h). Any strides (transposed or not contiguous
// operands are read in place), leading batch, and a bias fused into the epilogue. Each output
// element is summed in one fixed k order by one thread, so results do not depend on the thread
// count.
#include <atomic>
#include <cstdint>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// One operand of a batched product: element (r, c) of batch entry i is
// data[offsets[i] + r * row_stride + c * col_stride] (in elements). Broadcast batch entries
// simply repeat an offset.
struct GemmMatrix {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  const int64_t* offsets = nullptr;
};

struct GemmArgs {
  DType dtype = kFloat32;      // a, b and bias: f32 or bf16 (or f16 on the AVX2 path)
  DType out_dtype = kFloat32;  // c: f32, or `dtype` when that is bf16/f16 (rounded once, RNE)
  int64_t batch = 1, M = 0, N = 0, K = 0;
  GemmMatrix a;                // batch x (M x K)
  GemmMatrix b;                // batch x (K x N)
  const void* bias = nullptr;  // N elements of `dtype` added to every row, or null
  void* c = nullptr;           // contiguous batch x M x N of out_dtype
  // With out_dtype f32 on the AVX2 path: every output is rounded once (RNE) to this dtype (bf16
  // or f16) and stored widened back to f32, the bits of a `round_to` product converted to f32.
  // A weight gradient under autocast is such a product: its consumer (the cached weight cast's
  // backward) would widen the bf16/f16 result at once, so storing it widened saves the narrow
  // store and the widening pass (kFloat32: no rounding).
  DType round_to = kFloat32;
};

// Whether products of `dtype` run on the AVX2 path's driver (gemm_native_avx2), which widens
// bf16/f16 operands while it packs them: f32, bf16 and f16 at SIMD level avx2; bf16 and f16 at
// level avx512 (AVX-512 without its BF16 dot products: Skylake-X to Ice Lake) and f16 at level
// avx512_bf16, both on its 6x32 AVX-512 tile (gemm_avx2_impl.h). On those CPUs oneDNN emulates
// bf16 (the MLP's bf16-mixed step ran at 0.23 of its 32-true speed) and has no f16 kernels; a
// separate widening pass onto its f32 kernels holds a float32 copy of both operands, the memory
// bf16-true and the 4-bit layers save. On the 6x32 tile bf16-mixed runs at 0.86-0.96 of
// 32-true there (docs/performance.md, "AVX-512 without BF16").
bool gemm_avx2_path(DType dtype);

// On the AVX2 path, products with at most this many columns whose A rows are contiguous in k (a
// classifier head's x W^T) are computed as dot products along k instead of on the 6x16 tile
// (gemm_narrow_avx2.cpp).
inline constexpr int64_t kAvx2NarrowMaxN = 16;

// Whether the AVX2 GEMM reads A in place instead of packing it (gemm_native_avx2.cpp): an f32 A,
// or at SIMD level avx2 with a 12-way L1 a bf16 one, whose rows are contiguous in k and lie
// row_stride elements apart, unless that is a multiple of 4 KiB on a CPU whose L1 has fewer than 12
// ways: the six rows of a tile then share one L1 set beside the B panel's lines, which a 12-way L1
// holds (Intel since Ice Lake, Alder Lake's AVX2-only cores included: 2048 x 256 x 1024 from 0.81
// to 0.89 of the peak, +1-3 % on the MLP's and the GPT's 32-true steps) and an 8-way one (Zen 2-4)
// was not measured to hold. A bf16 value is widened by an AND beside the FMAs (a third vector
// port takes it on AVX2 CPUs); the 6x32 AVX-512 tile widens such rows into fp32 rows first and
// reads those in place (gemm_avx2_impl.h, widen_a_block), as its FMAs and ANDs would share
// Intel's two 512-bit ports. f16 needs a conversion per value, so it is packed at level avx2.
// The bf16 A is read in place only where the L1 has 12 ways or more too: on a Zen 3 (8 ways)
// packing it widened made whole bf16-mixed steps 4-9 % faster (MLP, ViT, GPT; docs/
// performance.md, "A real Zen 3 again"), where on the Intel core it had made the ViT's 4 %
// cheaper; whether the L1 or the AND on Zen 3's pipes is the cause was not isolated, and the
// L1's ways are what separates the two CPUs measured.
// Whether this CPU's L1 data cache has 12 ways or more: the property the AVX2 path's choices of
// reading A in place (below) and of routing short-K f32 products (gemm_backend.cpp) depend on.
inline bool l1_has_twelve_ways() { return cpu_identity().l1d_ways >= 12; }
// Test hook: 1 reads a bf16 A in place whatever the L1, 0 never, -1 (the default) by the L1, so
// that the in-place bf16 kernel is tested on every AVX2 CPU.
inline std::atomic<int>& avx2_bf16_a_in_place_forced() {
  static std::atomic<int> forced{-1};
  return forced;
}
inline bool avx2_reads_a_in_place(DType a_dtype, int64_t row_stride, int64_t col_stride) {
  const bool twelve_way_l1 = l1_has_twelve_ways();
  const int forced = avx2_bf16_a_in_place_forced().load(std::memory_order_relaxed);
  const bool readable =
      a_dtype == kFloat32 || (a_dtype == kBFloat16 && simd_level() == SimdLevel::kAvx2 &&
                              (forced < 0 ? twelve_way_l1 : forced == 1));
  return readable && col_stride == 1 &&
         (row_stride * static_cast<int64_t>(a_dtype.itemsize()) % 4096 != 0 || twelve_way_l1);
}

// Whether this CPU (after MANTISSA_DISABLE_SIMD) runs the native kernel for `dtype`: with
// AVX-512 BF16, f32 and bf16 run on the AVX-512 kernels and f16 on the AVX2 path (6x32 tile);
// with AVX-512 alone, f32 runs there and bf16/f16 on the AVX2 path (6x32 tile); at SIMD level
// avx2 (AVX2, FMA, F16C, no AVX-512) f32, bf16 and f16 all run on the AVX2 path.
bool gemm_native_supported(DType dtype);

// c = a @ b (+ bias) for every batch entry. Requires gemm_native_supported(args.dtype),
// M, N, K >= 1. OpenMP over output tiles.
void gemm_native(const GemmArgs& args);

}  // namespace mantissa::kernels
