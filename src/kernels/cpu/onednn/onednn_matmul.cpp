#include "kernels/cpu/onednn/onednn_matmul.h"

#include <cstdlib>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/primitive_cache.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using dnnl::memory;

memory::desc make_md(const Shape& dims, const Shape& strides, DType dt) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), to_dnnl(dt, "matmul"),
                      memory::dims(strides.begin(), strides.end()));
}

struct Entry {
  dnnl::matmul prim;
  memory::desc a, b, bias, dst, scratch;
};

using Key = PrimitiveKey;

PrimitiveCache<Entry>& cache() {
  static PrimitiveCache<Entry> c(kOnednnMatmulCacheCapacity);
  return c;
}

void append(Key& key, const Shape& s) {
  key.push_back(static_cast<int64_t>(s.size()));
  key.insert(key.end(), s.begin(), s.end());
}

}  // namespace

void onednn_matmul(DType dtype, const MatmulOperand& a, const MatmulOperand& b,
                   const MatmulOperand* bias, DType bias_dtype, void* dst, const Shape& dst_dims,
                   std::optional<DType> dst_dtype, std::optional<float> output_scale) {
  const DType out_dtype = dst_dtype.value_or(dtype);
  const size_t nd = dst_dims.size();
  MANTISSA_CHECK(nd >= 2 && nd <= DNNL_MAX_NDIMS && a.dims.size() == nd && b.dims.size() == nd,
                 "matmul", "oneDNN matmul needs operands of equal rank in [2, {}], got {}, {}, {}",
                 DNNL_MAX_NDIMS, shape_str(a.dims), shape_str(b.dims), shape_str(dst_dims));
  const Shape dst_strides = contiguous_strides(dst_dims);

  Key key;
  key.reserve(8 * nd + 8);
  key.push_back(static_cast<int64_t>(dtype.id()));
  key.push_back(bias ? static_cast<int64_t>(bias_dtype.id()) : -1);
  key.push_back(static_cast<int64_t>(out_dtype.id()));
  append(key, a.dims);
  append(key, a.strides);
  append(key, b.dims);
  append(key, b.strides);
  append(key, dst_dims);
  key.push_back(output_scale ? 1 : 0);
  if (bias) {
    append(key, bias->dims);
    append(key, bias->strides);
  }

  Entry e = cache().get(key, [&] {
    Entry n;
    n.a = make_md(a.dims, a.strides, dtype);
    n.b = make_md(b.dims, b.strides, dtype);
    n.dst = make_md(dst_dims, dst_strides, out_dtype);
    if (bias) n.bias = make_md(bias->dims, bias->strides, bias_dtype);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The scale as a binary-multiply post-op by a run-time scalar, so one cached primitive
    // serves every value, then the bias as a binary add: oneDNN 2.6 keeps its AMX kernels for
    // these, where run-time output scales fall back to a slower GEMM, and its output scales
    // would scale the primitive's own bias too.
    const bool bias_in_desc = bias && !output_scale;
    if (output_scale) {
      dnnl::post_ops po;
      po.append_binary(dnnl::algorithm::binary_mul, make_md(Shape(nd, 1), Shape(nd, 1), kFloat32));
      if (bias) po.append_binary(dnnl::algorithm::binary_add, n.bias);
      attr.set_post_ops(po);
    }
    try {
      auto desc = bias_in_desc ? dnnl::matmul::desc(n.a, n.b, n.bias, n.dst)
                               : dnnl::matmul::desc(n.a, n.b, n.dst);
      dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
      n.scratch = pd.scratchpad_desc();
      n.prim = dnnl::matmul(pd);
    } catch (const dnnl::error& err) {
      fail("matmul", "oneDNN could not create a {} matmul for {} @ {}: {}", dtype.name(),
           shape_str(a.dims), shape_str(b.dims), err.what());
    }
    return n;
  });

  const dnnl::engine& eng = cpu_engine();
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, memory(e.a, eng, const_cast<void*>(a.data)));
  args.emplace(DNNL_ARG_WEIGHTS, memory(e.b, eng, const_cast<void*>(b.data)));
  args.emplace(DNNL_ARG_DST, memory(e.dst, eng, dst));
  float scale = output_scale.value_or(1.0f);
  if (output_scale) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                 memory(make_md(Shape(nd, 1), Shape(nd, 1), kFloat32), eng, &scale));
    if (bias)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1,
                   memory(e.bias, eng, const_cast<void*>(bias->data)));
  } else if (bias) {
    args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<void*>(bias->data)));
  }
  execute_on_this_thread(e.prim, e.scratch, args);
}

namespace {

// The cached primitive of an [m, k] x [k, n] bf16 product whose B layout oneDNN chooses
// (format_tag::any); Entry::b holds that layout.
Entry tiled_b_entry(int64_t m, int64_t k, int64_t n, DType out_dtype, bool bias) {
  // -1: not a dtype id, so no plain product's key starts so.
  const Key key = {-1, m, k, n, static_cast<int64_t>(out_dtype.id()), bias ? 1 : 0};
  return cache().get(key, [&] {
    Entry e;
    e.a = memory::desc({m, k}, memory::data_type::bf16, memory::dims{k, 1});
    e.dst = memory::desc({m, n}, to_dnnl(out_dtype, "matmul"), memory::dims{n, 1});
    if (bias) e.bias = memory::desc({1, n}, memory::data_type::bf16, memory::dims{n, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      const memory::desc any({k, n}, memory::data_type::bf16, memory::format_tag::any);
      dnnl::matmul::primitive_desc pd(
          bias ? dnnl::matmul::desc(e.a, any, e.bias, e.dst) : dnnl::matmul::desc(e.a, any, e.dst),
          attr, cpu_engine());
      e.b = pd.weights_desc();
      e.scratch = pd.scratchpad_desc();
      e.prim = dnnl::matmul(pd);
      // Callers query the layout without bias and in bf16 (onednn_bf16_tiled_b_layout); a
      // product that writes B otherwise must find the same one. Checked once, at creation.
      if (bias || out_dtype != kBFloat16) {
        const memory::desc plain_dst({m, n}, memory::data_type::bf16, memory::dims{n, 1});
        const dnnl::matmul::primitive_desc queried(dnnl::matmul::desc(e.a, any, plain_dst), attr,
                                                   cpu_engine());
        MANTISSA_CHECK(queried.weights_desc() == e.b, "matmul",
                       "oneDNN chose another B layout for this product than the one queried");
      }
    } catch (const dnnl::error& err) {
      fail("matmul", "oneDNN could not create a bf16 matmul for [{}, {}] @ [{}, {}]: {}", m, k, k,
           n, err.what());
    }
    return e;
  });
}

}  // namespace

std::optional<Bf16TiledB> onednn_bf16_tiled_b_layout(int64_t m, int64_t k, int64_t n) {
  MANTISSA_CHECK(m > 0 && k > 0 && n > 0, "matmul", "empty product [{}, {}] @ [{}, {}]", m, k, k,
                 n);
  const dnnl_memory_desc_t& d = tiled_b_entry(m, k, n, kBFloat16, false).b.data;
  const auto& blk = d.format_desc.blocking;
  const bool tiled = d.format_kind == dnnl_blocked && d.ndims == 2 && d.offset0 == 0 &&
                     blk.inner_nblks == 3 && blk.inner_blks[0] == 16 && blk.inner_idxs[0] == 0 &&
                     blk.inner_blks[1] == 64 && blk.inner_idxs[1] == 1 && blk.inner_blks[2] == 2 &&
                     blk.inner_idxs[2] == 0 && d.padded_dims[0] % Bf16TiledB::kTileK == 0 &&
                     d.padded_dims[1] % Bf16TiledB::kTileN == 0;
  if (!tiled) return std::nullopt;
  Bf16TiledB t;
  t.k_tiles = d.padded_dims[0] / Bf16TiledB::kTileK;
  t.n_tiles = d.padded_dims[1] / Bf16TiledB::kTileN;
  t.k_tile_stride = blk.strides[0];
  t.n_tile_stride = blk.strides[1];
  t.elements = static_cast<int64_t>(dnnl::memory::desc(d).get_size() / 2);
  if (t.elements != t.k_tiles * t.n_tiles * Bf16TiledB::kTileElements) return std::nullopt;
  return t;
}

void onednn_matmul_bf16_tiled_b(const void* a, const void* b, int64_t m, int64_t k, int64_t n,
                                void* dst, DType dst_dtype, const void* bias) {
  MANTISSA_CHECK(dst_dtype == kBFloat16 || dst_dtype == kFloat32, "matmul",
                 "a tiled-B product writes bfloat16 or float32, got {}", dst_dtype.name());
  const Entry e = tiled_b_entry(m, k, n, dst_dtype, bias != nullptr);
  const dnnl::engine& eng = cpu_engine();
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, memory(e.a, eng, const_cast<void*>(a)));
  args.emplace(DNNL_ARG_WEIGHTS, memory(e.b, eng, const_cast<void*>(b)));
  args.emplace(DNNL_ARG_DST, memory(e.dst, eng, dst));
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<void*>(bias)));
  execute_on_this_thread(e.prim, e.scratch, args);
}

size_t onednn_matmul_cache_size() { return cache().size(); }
void onednn_matmul_clear_cache() { cache().clear(); }

}  // namespace mantissa::kernels
