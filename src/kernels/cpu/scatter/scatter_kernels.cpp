#include "kernels/cpu/scatter/scatter_kernels.h"

#include <cstring>

#include "core/dtype_dispatch.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {

std::vector<int64_t> scatter_offsets(const Shape& index_shape, const int64_t* idx, int64_t dim,
                                     const Shape& strides) {
  const int64_t n = numel_of(index_shape);
  const int64_t rank = static_cast<int64_t>(index_shape.size());
  std::vector<int64_t> off(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t p = 0; p < n; ++p) {
    int64_t rem = p, o = 0;
    for (int64_t q = rank - 1; q >= 0; --q) {
      const int64_t c = rem % index_shape[q];
      rem /= index_shape[q];
      o += (q == dim && idx != nullptr ? idx[p] : c) * strides[q];
    }
    off[p] = o;
  }
  return off;
}

namespace {

template <typename W>
void move_words(W* out, const int64_t* out_off, const W* in, const int64_t* in_off, int64_t n,
                const uint8_t* keep) {
  // Serial: with duplicate destinations the last pair must win.
  for (int64_t p = 0; p < n; ++p)
    if (keep == nullptr || keep[p]) out[out_off[p]] = in[in_off[p]];
}

}  // namespace

void move_elements(void* out, const int64_t* out_off, const void* in, const int64_t* in_off,
                   int64_t n, size_t itemsize, const uint8_t* keep) {
  switch (itemsize) {
    case 1:
      move_words(static_cast<uint8_t*>(out), out_off, static_cast<const uint8_t*>(in), in_off, n,
                 keep);
      break;
    case 2:
      move_words(static_cast<uint16_t*>(out), out_off, static_cast<const uint16_t*>(in), in_off, n,
                 keep);
      break;
    case 4:
      move_words(static_cast<uint32_t*>(out), out_off, static_cast<const uint32_t*>(in), in_off, n,
                 keep);
      break;
    case 8:
      move_words(static_cast<uint64_t*>(out), out_off, static_cast<const uint64_t*>(in), in_off, n,
                 keep);
      break;
    default:
      fail("scatter",
           "elements of {} bytes are not supported (not supported for complex "
           "tensors)",
           itemsize);
  }
}

void zero_elements(void* out, const int64_t* off, int64_t n, size_t itemsize) {
  auto* bytes = static_cast<unsigned char*>(out);
  for (int64_t p = 0; p < n; ++p) std::memset(bytes + off[p] * itemsize, 0, itemsize);
}

void accumulate_elements(DType dtype, void* out, int64_t out_numel, const int64_t* out_off,
                         const void* in, const int64_t* in_off, int64_t n, double alpha) {
  dispatch_floating(dtype, "accumulate_elements", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    T* o = static_cast<T*>(out);
    const T* s = static_cast<const T*>(in);
    const A a = static_cast<A>(alpha);
    if constexpr (std::is_same_v<T, A>) {
      // f32 / f64: the output is already the arithmetic type.
      if (alpha == 1.0) {
        for (int64_t p = 0; p < n; ++p) o[out_off[p]] += s[in_off[p]];
      } else {
        for (int64_t p = 0; p < n; ++p) o[out_off[p]] += a * s[in_off[p]];
      }
    } else {
      // f16 / bf16: widen, add every pair in fp32, round each element once.
      std::vector<A> acc(static_cast<size_t>(out_numel));
      for (int64_t i = 0; i < out_numel; ++i) acc[i] = load(o[i]);
      for (int64_t p = 0; p < n; ++p) acc[out_off[p]] += a * load(s[in_off[p]]);
      for (int64_t i = 0; i < out_numel; ++i) o[i] = store<T>(acc[i]);
    }
  });
}

std::vector<uint8_t> last_writers(const int64_t* out_off, int64_t n, int64_t out_numel) {
  std::vector<uint8_t> seen(static_cast<size_t>(out_numel), 0);
  std::vector<uint8_t> last(static_cast<size_t>(n), 0);
  for (int64_t p = n - 1; p >= 0; --p) {
    if (!seen[out_off[p]]) {
      seen[out_off[p]] = 1;
      last[p] = 1;
    }
  }
  return last;
}

}  // namespace mantissa::kernels
