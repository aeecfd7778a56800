// Bulk dtype conversion: SIMD fast paths for the float32 <-> narrow-float pairs, chosen at run
// time, and one generic element loop for every other pair of the 11 dtypes.
#include "mantissa/core/convert.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/convert_simd.h"
#include "core/simd_dispatch.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"

namespace mantissa {

namespace convert_detail {
namespace {
SimdLevelSelector g_level;
}  // namespace

SimdLevel active_convert_level() { return g_level.active(); }
bool force_convert_level(std::optional<SimdLevel> level) { return g_level.force(level); }

}  // namespace convert_detail

namespace {

namespace k = convert_detail;

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;

// Runs f(begin, end) over [0, n): one contiguous chunk per thread (fixed static partition),
// chunk starts rounded to 64 elements so no two threads write the same cache line.
template <typename F>
void parallel_range(int64_t n, F&& f) {
#ifdef _OPENMP
  if (n > kParallelThreshold && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads();
      const int64_t t = omp_get_thread_num();
      const int64_t chunk = ((n + threads - 1) / threads + 63) & ~int64_t{63};
      const int64_t begin = std::min(n, t * chunk);
      const int64_t end = std::min(n, begin + chunk);
      if (begin < end) f(begin, end);
    }
    return;
  }
#endif
  f(0, n);
}

void check_args(const void* src, const void* dst, int64_t n, const char* where) {
  MANTISSA_CHECK(n >= 0, where, "negative element count {}", n);
  MANTISSA_CHECK(n == 0 || (src != nullptr && dst != nullptr), where, "null buffer for {} elements",
                 n);
}

// ---- scalar kernels (also the reference the SIMD kernels are tested against) ----

void f32_to_bf16_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16_bits(src[i]);
}
void bf16_to_f32_scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i]);
}
void f32_to_f16_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}
void f16_to_f32_scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}
void f32_to_e4m3_scalar(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_fp8_e4m3_bits(src[i], mode);
}
void f32_to_e5m2_scalar(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_fp8_e5m2_bits(src[i], mode);
}

// FP8 decoding is a 256-entry lookup; the tables come from the scalar decoders.
struct Fp8Tables {
  float e4m3[256];
  float e5m2[256];
};

const Fp8Tables& fp8_tables() {
  static const Fp8Tables tables = [] {
    Fp8Tables t;
    for (int b = 0; b < 256; ++b) {
      t.e4m3[b] = fp8_e4m3_bits_to_float(static_cast<uint8_t>(b));
      t.e5m2[b] = fp8_e5m2_bits_to_float(static_cast<uint8_t>(b));
    }
    return t;
  }();
  return tables;
}

// ---- generic element loop for every dtype pair ----

// Element storage type of each dtype, in DType::Id order.
using StorageTypes = std::tuple<double, float, uint16_t, uint16_t, uint8_t, uint8_t, int64_t,
                                int32_t, uint8_t, int8_t, uint8_t>;
template <DType::Id id>
using Storage = std::tuple_element_t<static_cast<size_t>(id), StorageTypes>;

// The value an element stands for: narrow floats widen exactly to float; bool bytes other
// than 0 read as true.
template <DType::Id id>
auto load(Storage<id> v) {
  using Id = DType::Id;
  if constexpr (id == Id::f16) {
    return half_bits_to_float(v);
  } else if constexpr (id == Id::bf16) {
    return bf16_bits_to_float(v);
  } else if constexpr (id == Id::f8_e4m3) {
    return fp8_tables().e4m3[v];
  } else if constexpr (id == Id::f8_e5m2) {
    return fp8_tables().e5m2[v];
  } else if constexpr (id == Id::b8) {
    return v != 0;
  } else {
    return v;
  }
}

// Narrowing double or int64 to fp16/bf16/fp8 through a round-to-nearest float would round
// twice (e.g. a double just above a bf16 tie can land exactly on it). Rounding to float with
// "round to odd" keeps the information a second RNE rounding needs, so the pair is one correct
// RNE rounding: float has at least two more mantissa bits than every narrow format.
float round_to_odd(double d) {
  const float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  uint32_t b = std::bit_cast<uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --b;  // truncate toward zero
  return std::bit_cast<float>(b | 1u);
}

float round_to_odd(int64_t v) {
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (mag < (uint64_t{1} << 24)) return static_cast<float>(v);  // exact
  // Keep the top 24 bits, with a sticky low bit for anything dropped; then scale exactly.
  const int shift = 64 - std::countl_zero(mag) - 24;
  uint64_t top = mag >> shift;
  if ((mag & ((uint64_t{1} << shift) - 1)) != 0) top |= 1;
  const float r = std::ldexp(static_cast<float>(top), shift);
  return v < 0 ? -r : r;
}

template <typename V>
float to_float_for_narrowing(V v) {
  if constexpr (std::is_same_v<V, float>) {
    return v;
  } else if constexpr (std::is_same_v<V, double> || std::is_same_v<V, int64_t>) {
    return round_to_odd(v);
  } else if constexpr (std::is_same_v<V, int32_t>) {
    return round_to_odd(static_cast<double>(v));  // int32 -> double is exact
  } else {
    return static_cast<float>(v);  // 8-bit ints and bool are exact in float
  }
}

// Float to integer as static_cast on x86 behaves, but without undefined behaviour: truncation
// toward zero; NaN and out-of-range give the "integer indefinite" INT_MIN of CVTTSx2SI; 8-bit
// targets go through int32 and keep the low byte, as compiled code does.
template <typename T, typename V>
T to_integer(V v) {
  if constexpr (std::is_integral_v<V>) {
    return static_cast<T>(v);
  } else {
    const double d = static_cast<double>(v);
    if constexpr (std::is_same_v<T, int64_t>) {
      if (d >= -0x1p63 && d < 0x1p63) return static_cast<int64_t>(d);
      return std::numeric_limits<int64_t>::min();
    } else {
      int32_t r = std::numeric_limits<int32_t>::min();
      if (d > -0x1p31 - 1.0 && d < 0x1p31) r = static_cast<int32_t>(d);
      return static_cast<T>(r);
    }
  }
}

template <DType::Id id, typename V>
Storage<id> store(V v, Fp8Saturation mode) {
  using Id = DType::Id;
  if constexpr (id == Id::f64 || id == Id::f32) {
    return static_cast<Storage<id>>(v);
  } else if constexpr (id == Id::f16) {
    return float_to_half_bits(to_float_for_narrowing(v));
  } else if constexpr (id == Id::bf16) {
    return float_to_bf16_bits(to_float_for_narrowing(v));
  } else if constexpr (id == Id::f8_e4m3) {
    return float_to_fp8_e4m3_bits(to_float_for_narrowing(v), mode);
  } else if constexpr (id == Id::f8_e5m2) {
    return float_to_fp8_e5m2_bits(to_float_for_narrowing(v), mode);
  } else if constexpr (id == Id::b8) {
    return v != 0 ? 1 : 0;  // NaN != 0, so NaN is true, like static_cast<bool>
  } else {
    return to_integer<Storage<id>>(v);
  }
}

template <DType::Id From, DType::Id To>
void convert_generic(const void* src, void* dst, int64_t n, Fp8Saturation mode) {
  const auto* s = static_cast<const Storage<From>*>(src);
  auto* d = static_cast<Storage<To>*>(dst);
  parallel_range(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) d[i] = store<To>(load<From>(s[i]), mode);
  });
}

using GenericFn = void (*)(const void*, void*, int64_t, Fp8Saturation);

template <size_t... I>
constexpr auto make_generic_table(std::index_sequence<I...>) {
  constexpr int kN = DType::kRealCount;
  return std::array<GenericFn, kN * kN>{
      {&convert_generic<static_cast<DType::Id>(I / kN), static_cast<DType::Id>(I % kN)>...}};
}

constexpr auto kGenericTable =
    make_generic_table(std::make_index_sequence<DType::kRealCount * DType::kRealCount>{});

// Complex conversions (docs/complex.md): complex64 <-> complex128 element by element, a real
// dtype to complex with a zero imaginary part. Complex to real would silently drop the
// imaginary part (PyTorch warns and does it); here it is an error that names the fix.
void convert_complex(const void* src, DType from, void* dst, DType to, int64_t n) {
  if (!to.is_complex()) {
    fail("to",
         "cannot convert {} to {}: that would drop the imaginary part; take real(), "
         "imag() or abs() first",
         from.name(), to.name());
  }
  std::vector<double> parts(static_cast<size_t>(2 * n), 0.0);
  if (from == kComplex64) {
    const auto* s = static_cast<const float*>(src);
    for (int64_t i = 0; i < 2 * n; ++i) parts[i] = s[i];
  } else if (from == kComplex128) {
    std::memcpy(parts.data(), src, static_cast<size_t>(2 * n) * sizeof(double));
  } else {
    std::vector<double> re(static_cast<size_t>(n));
    kGenericTable[static_cast<int>(from.id()) * DType::kRealCount +
                  static_cast<int>(DType::Id::f64)](src, re.data(), n, Fp8Saturation::kSatFinite);
    for (int64_t i = 0; i < n; ++i) parts[2 * i] = re[i];
  }
  if (to == kComplex64) {
    auto* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < 2 * n; ++i) d[i] = static_cast<float>(parts[i]);
  } else {
    std::memcpy(dst, parts.data(), static_cast<size_t>(2 * n) * sizeof(double));
  }
}

}  // namespace

namespace convert_detail {

ToHalfWidth f32_to_bf16_kernel() {
  switch (active_convert_level()) {
    case SimdLevel::kAvx512Bf16:
      return f32_to_bf16_avx512bf16;
    case SimdLevel::kAvx512:
      return f32_to_bf16_avx512;
    case SimdLevel::kAvx2:
      return f32_to_bf16_avx2;
    case SimdLevel::kScalar:
      break;
  }
  return f32_to_bf16_scalar;
}

FromHalfWidth bf16_to_f32_kernel() {
  switch (active_convert_level()) {
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512:
      return bf16_to_f32_avx512;
    case SimdLevel::kAvx2:
      return bf16_to_f32_avx2;
    case SimdLevel::kScalar:
      break;
  }
  return bf16_to_f32_scalar;
}

ToHalfWidth f32_to_f16_kernel() {
  switch (active_convert_level()) {
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512:
      return f32_to_f16_avx512;
    case SimdLevel::kAvx2:
      return f32_to_f16_avx2;  // kAvx2 includes F16C
    case SimdLevel::kScalar:
      break;
  }
  return f32_to_f16_scalar;
}

FromHalfWidth f16_to_f32_kernel() {
  switch (active_convert_level()) {
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512:
      return f16_to_f32_avx512;
    case SimdLevel::kAvx2:
      return f16_to_f32_avx2;
    case SimdLevel::kScalar:
      break;
  }
  return f16_to_f32_scalar;
}

// Only the AVX2 level has streaming forms: measured on a Zen 3 (docs/performance.md, "Streaming
// stores for conversions larger than the cache"); the AVX-512 kernels were not measured with
// them.
template <typename K>
K streaming_at_avx2(K avx2_stream) {
  return active_convert_level() == SimdLevel::kAvx2 ? avx2_stream : nullptr;
}

ToHalfWidth f32_to_bf16_streaming_kernel() { return streaming_at_avx2(&f32_to_bf16_avx2_stream); }
FromHalfWidth bf16_to_f32_streaming_kernel() { return streaming_at_avx2(&bf16_to_f32_avx2_stream); }
ToHalfWidth f32_to_f16_streaming_kernel() { return streaming_at_avx2(&f32_to_f16_avx2_stream); }
FromHalfWidth f16_to_f32_streaming_kernel() { return streaming_at_avx2(&f16_to_f32_avx2_stream); }

int64_t streaming_convert_min_bytes() { return int64_t{32} << 20; }

}  // namespace convert_detail

namespace {

// A bulk conversion: checked arguments, then the level's row kernel over parallel ranges. An
// output of at least streaming_convert_min_bytes() cannot stay in the last-level cache, so it
// is written with non-temporal stores where the level has them: plain stores would first read
// every destination line and evict the source (1.1-1.5x the speed on a Zen 3).
template <typename S, typename D>
void convert_bulk(const S* src, D* dst, int64_t n, const char* op,
                  void (*fn)(const S*, D*, int64_t), void (*streaming)(const S*, D*, int64_t)) {
  check_args(src, dst, n, op);
  if (streaming != nullptr &&
      n * static_cast<int64_t>(sizeof(D)) >= k::streaming_convert_min_bytes())
    fn = streaming;
  parallel_range(n, [&](int64_t b, int64_t e) { fn(src + b, dst + b, e - b); });
}

}  // namespace

void convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  convert_bulk(src, dst, n, "convert_f32_to_bf16", k::f32_to_bf16_kernel(),
               k::f32_to_bf16_streaming_kernel());
}

void convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  convert_bulk(src, dst, n, "convert_bf16_to_f32", k::bf16_to_f32_kernel(),
               k::bf16_to_f32_streaming_kernel());
}

void convert_f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  convert_bulk(src, dst, n, "convert_f32_to_f16", k::f32_to_f16_kernel(),
               k::f32_to_f16_streaming_kernel());
}

void convert_f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  convert_bulk(src, dst, n, "convert_f16_to_f32", k::f16_to_f32_kernel(),
               k::f16_to_f32_streaming_kernel());
}

void convert_f32_to_fp8(const float* src, uint8_t* dst, int64_t n, DType fp8, Fp8Saturation mode) {
  check_args(src, dst, n, "convert_f32_to_fp8");
  MANTISSA_CHECK(fp8.is_float8(), "convert_f32_to_fp8", "target dtype {} is not a float8 type",
                 fp8.name());
  const bool e4m3 = fp8 == kFloat8_e4m3fn;
  void (*fn)(const float*, uint8_t*, int64_t, Fp8Saturation) =
      e4m3 ? f32_to_e4m3_scalar : f32_to_e5m2_scalar;
  switch (k::active_convert_level()) {
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512:
      fn = e4m3 ? k::f32_to_fp8_e4m3_avx512 : k::f32_to_fp8_e5m2_avx512;
      break;
    case SimdLevel::kAvx2:
      // Streaming from 5 bytes an element (source and output) past the last-level cache: the
      // source, four fifths of the traffic, evicts the output anyway (convert_simd.h).
      if (n * 5 >= k::streaming_convert_min_bytes())
        fn = e4m3 ? k::f32_to_fp8_e4m3_avx2_stream : k::f32_to_fp8_e5m2_avx2_stream;
      else
        fn = e4m3 ? k::f32_to_fp8_e4m3_avx2 : k::f32_to_fp8_e5m2_avx2;
      break;
    case SimdLevel::kScalar:
      break;
  }
  parallel_range(n, [&](int64_t b, int64_t e) { fn(src + b, dst + b, e - b, mode); });
}

void convert_fp8_to_f32(const uint8_t* src, float* dst, int64_t n, DType fp8) {
  check_args(src, dst, n, "convert_fp8_to_f32");
  MANTISSA_CHECK(fp8.is_float8(), "convert_fp8_to_f32", "source dtype {} is not a float8 type",
                 fp8.name());
  const float* table = fp8 == kFloat8_e4m3fn ? fp8_tables().e4m3 : fp8_tables().e5m2;
  parallel_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = table[src[i]];
  });
}

void convert_buffer(const void* src, DType from, void* dst, DType to, int64_t n,
                    Fp8Saturation fp8_mode) {
  check_args(src, dst, n, "convert_buffer");
  if (n == 0) return;
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(n) * from.itemsize());
    return;
  }
  const auto* fsrc = static_cast<const float*>(src);
  if (from == kFloat32) {
    if (to == kBFloat16) return convert_f32_to_bf16(fsrc, static_cast<uint16_t*>(dst), n);
    if (to == kFloat16) return convert_f32_to_f16(fsrc, static_cast<uint16_t*>(dst), n);
    if (to.is_float8()) {
      return convert_f32_to_fp8(fsrc, static_cast<uint8_t*>(dst), n, to, fp8_mode);
    }
  }
  if (to == kFloat32) {
    auto* fdst = static_cast<float*>(dst);
    if (from == kBFloat16) return convert_bf16_to_f32(static_cast<const uint16_t*>(src), fdst, n);
    if (from == kFloat16) return convert_f16_to_f32(static_cast<const uint16_t*>(src), fdst, n);
    if (from.is_float8()) {
      return convert_fp8_to_f32(static_cast<const uint8_t*>(src), fdst, n, from);
    }
  }
  if (from.is_complex() || to.is_complex()) return convert_complex(src, from, dst, to, n);
  const int index = static_cast<int>(from.id()) * DType::kRealCount + static_cast<int>(to.id());
  kGenericTable[index](src, dst, n, fp8_mode);
}

}  // namespace mantissa
