// The FP8 casts' CUDA branch (fp8_cuda.h).
#include "kernels/cuda/fp8/fp8_cuda.h"

#if MANTISSA_HAS_CUDA
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/fp8/fp8_kernels.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::gpu {

namespace {

// A device buffer of cast statistics (cuda::detail::Fp8CastCounters, 3 int64 each), zeroed
// once, handed out entry by entry; a full one is replaced by a new one (the entries' holders
// keep the old one alive until they are read).
struct StatsBlock {
  static constexpr int64_t kEntries = 4096;
  Tensor device;
  int64_t used = 0;           // entries handed out
  int64_t copied = 0;         // entries in `host`
  std::vector<int64_t> host;  // the first `copied` entries, read back
};

std::mutex& stats_mutex() {
  static std::mutex mu;
  return mu;
}

// The block new casts on `device` take entries from. Never destroyed (a static destructor may
// run after the CUDA driver is gone): a leaked pointer.
std::shared_ptr<StatsBlock>& current_block(int device) {
  static auto* blocks = new std::map<int, std::shared_ptr<StatsBlock>>();
  return (*blocks)[device];
}

}  // namespace

Fp8CastOnGpu fp8_scaled_cast(const Tensor& x, DType fp8, float scale, bool transpose) {
  cuda::detail::DeviceGuard guard(x.device());
  const Tensor src = x.detach().contiguous();
  Fp8CastOnGpu r;
  r.codes = empty(src.shape(), fp8, src.device());
  static_assert(sizeof(cuda::detail::Fp8CastCounters) == 3 * sizeof(int64_t));
  std::shared_ptr<StatsBlock> block;
  {
    std::lock_guard<std::mutex> lock(stats_mutex());
    std::shared_ptr<StatsBlock>& cur = current_block(src.device().index);
    if (!cur || cur->used == StatsBlock::kEntries) {
      cur = std::make_shared<StatsBlock>();
      cur->device = zeros({3 * StatsBlock::kEntries}, kInt64, src.device());
    }
    block = cur;
    r.stats_index = cur->used++;
  }
  auto* counters =
      static_cast<cuda::detail::Fp8CastCounters*>(block->device.device_ptr()) + r.stats_index;
  const int64_t cols = src.dim() == 0 ? 1 : src.size(-1);
  const int64_t rows = cols == 0 ? 0 : src.numel() / cols;
  if (transpose) r.codes_t = empty({cols, rows}, fp8, src.device());
  const bool ok = cuda::detail::launch_fp8_scaled_cast(
      src.device_ptr(), detail::cuda_scalar_of(src.dtype(), "fp8 quantize"),
      static_cast<uint8_t*>(r.codes.device_ptr()),
      transpose ? static_cast<uint8_t*>(r.codes_t.device_ptr()) : nullptr, rows, cols, scale,
      fp8 == kFloat8_e5m2, counters);
  MANTISSA_CHECK(ok, "fp8 quantize", "expected a float32, bfloat16 or float16 tensor, got {}",
                 src.dtype().name());
  r.stats_block = std::move(block);
  return r;
}

Fp8CastStats read_fp8_cast_stats(const std::shared_ptr<void>& stats_block, int64_t stats_index) {
  MANTISSA_CHECK(stats_block != nullptr && stats_index >= 0, "fp8 quantize",
                 "internal error: no statistics of a GPU cast to read");
  auto& b = *static_cast<StatsBlock*>(stats_block.get());
  std::lock_guard<std::mutex> lock(stats_mutex());
  MANTISSA_CHECK(stats_index < b.used, "fp8 quantize",
                 "internal error: cast statistics entry {} of {}", stats_index, b.used);
  if (stats_index >= b.copied) {
    const Tensor h = b.device.narrow(0, 0, 3 * b.used).to(kCPU);  // waits for the casts
    b.host.assign(h.data<int64_t>(), h.data<int64_t>() + 3 * b.used);
    b.copied = b.used;
  }
  cuda::detail::Fp8CastCounters c{};
  std::memcpy(&c, b.host.data() + 3 * stats_index, sizeof(c));
  Fp8CastStats r;
  std::memcpy(&r.amax, &c.amax_bits, sizeof(float));
  r.saturated = static_cast<int64_t>(c.saturated);
  r.flushed = static_cast<int64_t>(c.flushed);
  return r;
}

Tensor fp8_dequantize(const Tensor& codes, float scale_inv, DType out) {
  MANTISSA_CHECK(codes.dtype().is_float8(), "fp8 dequantize", "expected FP8 codes, got {}",
                 codes.dtype().name());
  cuda::detail::DeviceGuard guard(codes.device());
  MANTISSA_CHECK(codes.is_contiguous(), "fp8 dequantize", "expected contiguous codes");
  Tensor t = empty(codes.shape(), out, codes.device());
  const bool ok = cuda::detail::launch_fp8_dequantize(
      static_cast<const uint8_t*>(codes.device_ptr()), codes.dtype() == kFloat8_e5m2,
      t.device_ptr(), detail::cuda_scalar_of(out, "fp8 dequantize"), codes.numel(), scale_inv);
  MANTISSA_CHECK(ok, "fp8 dequantize", "the output must be float32, float16 or bfloat16, got {}",
                 out.name());
  return t;
}

Tensor fp8_transpose(const Tensor& codes) {
  MANTISSA_CHECK(codes.dim() == 2 && codes.is_contiguous(), "fp8 transpose",
                 "expected contiguous 2-D codes, got {}", shape_str(codes.shape()));
  cuda::detail::DeviceGuard guard(codes.device());
  Tensor t = empty({codes.size(1), codes.size(0)}, codes.dtype(), codes.device());
  cuda::detail::launch_transpose_bytes(static_cast<const uint8_t*>(codes.device_ptr()),
                                       static_cast<uint8_t*>(t.device_ptr()), codes.size(0),
                                       codes.size(1));
  return t;
}

}  // namespace mantissa::kernels::gpu

#endif
