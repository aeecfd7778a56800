#include "core/strided_loops.h"

#include <cstring>

namespace mantissa::kernels {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const size_t nd = shape.size();
  const size_t td = t.shape().size();
  Shape out(nd, 0);
  for (size_t i = 0; i < td; ++i) {
    const size_t o = nd - td + i;
    out[o] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return out;
}

namespace {
template <typename W>
void copy_words(const W* src, const Shape& ss, W* dst, const Shape& ds, const Shape& shape) {
  const int64_t si = ss.empty() ? 0 : ss.back();
  const int64_t di = ds.empty() ? 0 : ds.back();
  for_each_row<2>(shape, {&ss, &ds}, [&](const std::array<int64_t, 2>& off, int64_t count) {
    const W* s = src + off[0];
    W* d = dst + off[1];
    if (si == 1 && di == 1) {
      std::memcpy(d, s, static_cast<size_t>(count) * sizeof(W));
    } else {
      for (int64_t i = 0; i < count; ++i) d[i * di] = s[i * si];
    }
  });
}
}  // namespace

void strided_copy(const void* src, const Shape& src_strides, void* dst, const Shape& dst_strides,
                  const Shape& shape, size_t itemsize) {
  switch (itemsize) {
    case 1:
      return copy_words(static_cast<const uint8_t*>(src), src_strides, static_cast<uint8_t*>(dst),
                        dst_strides, shape);
    case 2:
      return copy_words(static_cast<const uint16_t*>(src), src_strides, static_cast<uint16_t*>(dst),
                        dst_strides, shape);
    case 4:
      return copy_words(static_cast<const uint32_t*>(src), src_strides, static_cast<uint32_t*>(dst),
                        dst_strides, shape);
    case 8:
      return copy_words(static_cast<const uint64_t*>(src), src_strides, static_cast<uint64_t*>(dst),
                        dst_strides, shape);
    case 16: {  // complex128: two 8-byte words per element, moved together
      struct Pair {
        uint64_t lo, hi;
      };
      return copy_words(static_cast<const Pair*>(src), src_strides, static_cast<Pair*>(dst),
                        dst_strides, shape);
    }
    default:
      fail("copy", "unsupported element size {}", itemsize);
  }
}

}  // namespace mantissa::kernels
