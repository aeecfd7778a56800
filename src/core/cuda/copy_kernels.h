#pragma once
// Element copies on a GPU (copy_kernels.cu): strided, broadcasting and casting in one pass, and
// fills. Plain declarations: included by the .cu and by core's Tensor code alike.
#include <cstdint>

namespace mantissa::cuda::detail {

// The element types the CUDA backend stores (FP8 and complex tensors stay on the CPU).
enum class Scalar : uint8_t { f64, f32, f16, bf16, i64, i32, u8, i8, b8 };

inline constexpr int kMaxDims = 8;
struct CopyLayout {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};  // 0 along broadcast dimensions
  int64_t dst_strides[kMaxDims] = {};
};

// dst[i] = cast(src[i]) over the layout's elements (offsets already applied to the pointers).
// Floating values pass through double (exact for every stored type, and double -> narrow is
// one round to nearest even); integers to integers stay integers. On the current stream.
void launch_strided_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type,
                            const CopyLayout& layout, int64_t numel);
// Contiguous cast, the common case of the above.
void launch_convert(const void* src, Scalar src_type, void* dst, Scalar dst_type, int64_t numel);
// dst[0..numel) = value, converted once to the type.
void launch_fill(void* dst, Scalar type, double value, int64_t numel);
// Contiguous casts of count tensors from one type to another in as few launches as possible
// (one per 48 tensors for f32 -> f16/bf16, the weight casts of autocast; one per tensor for
// other pairs), each element as launch_convert casts it.
void launch_convert_many(const void* const* src, Scalar src_type, void* const* dst, Scalar dst_type,
                         const int64_t* numel, int64_t count);

}  // namespace mantissa::cuda::detail
