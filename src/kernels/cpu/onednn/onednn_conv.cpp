#include "kernels/cpu/onednn/onednn_conv.h"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/primitive_cache.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Per-thread staging buffers for the reordered operands, one per slot, grown on demand and
// reused (a fresh allocation per call would page-fault megabytes every step).
enum Slot { kSlotSrc = 0, kSlotWei = 1, kSlotDst = 2, kSlotCount = 3 };
void* thread_buffer(Slot slot, size_t bytes) {
  thread_local GrowableBuffer bufs[kSlotCount];
  return bufs[slot].get(bytes, "conv2d");
}

// An input in the layout the primitive wants: the caller's buffer itself when the layouts agree,
// else a reorder into a staging buffer.
memory input_memory(const memory::desc& want, const memory::desc& user, const void* data,
                    Slot slot) {
  const dnnl::engine& eng = cpu_engine();
  memory user_mem(user, eng, const_cast<void*>(data));
  if (want == user) return user_mem;
  memory staged(want, eng, thread_buffer(slot, want.get_size()));
  dnnl::reorder(user_mem, staged).execute(thread_stream(), user_mem, staged);
  return staged;
}

// An output: the caller's buffer when the layouts agree, else a staging buffer that
// finish_output reorders into the caller's buffer after the primitive ran.
memory output_memory(const memory::desc& want, const memory::desc& user, void* data, Slot slot) {
  if (want == user) return memory(user, cpu_engine(), data);
  return memory(want, cpu_engine(), thread_buffer(slot, want.get_size()));
}

void finish_output(const memory& produced, const memory::desc& user, void* data) {
  if (produced.get_data_handle() == data) return;
  memory user_mem(user, cpu_engine(), data);
  dnnl::reorder(produced, user_mem)
      .execute(thread_stream(), const_cast<memory&>(produced), user_mem);
}

enum class Pass : int64_t { kForward = 0, kBackwardData = 1, kBackwardWeights = 2 };

// The primitive with the layouts it wants (src, wei, dst: oneDNN's blocked formats, picked with
// format_tag::any) and the plain layouts of the caller's buffers (user_*).
struct Entry {
  dnnl::primitive prim;
  memory::desc src, wei, bias, dst, scratch;
  memory::desc user_src, user_wei, user_dst;
};

using Key = PrimitiveKey;

PrimitiveCache<Entry>& cache() {
  static PrimitiveCache<Entry> c(kOnednnConvCacheCapacity);
  return c;
}

Key make_key(Pass pass, DType dt, const ConvGeometry& g, bool bias) {
  return {static_cast<int64_t>(pass),
          static_cast<int64_t>(dt.id()),
          bias ? 1 : 0,
          g.n,
          g.ic,
          g.ih,
          g.iw,
          g.oc,
          g.kh,
          g.kw,
          g.oh,
          g.ow,
          g.sh,
          g.sw,
          g.ph,
          g.pw,
          g.dh,
          g.dw,
          g.groups};
}

// The descriptors of one geometry: the caller's plain NCHW activations and (G)OIHW weights
// (user_*), and the same with format_tag::any for the primitive. With `any` oneDNN picks its
// blocked direct-convolution kernels (jit avx512 / avx512_core_bf16), measured 1.4x (f32) and
// 2.2x (bf16) faster than its GEMM-based convolution on plain layouts, reorders included.
struct Descs {
  memory::desc src, wei, bias, dst;
  memory::desc user_src, user_wei, user_dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

Descs make_descs(const ConvGeometry& g, memory::data_type act, memory::data_type wt,
                 memory::data_type bias_dt) {
  Descs d;
  const memory::dims src{g.n, g.ic, g.ih, g.iw}, dst{g.n, g.oc, g.oh, g.ow};
  const memory::dims wei =
      g.groups == 1 ? memory::dims{g.oc, g.ic, g.kh, g.kw}
                    : memory::dims{g.groups, g.oc / g.groups, g.ic / g.groups, g.kh, g.kw};
  d.user_src = memory::desc(src, act, Tag::nchw);
  d.user_dst = memory::desc(dst, act, Tag::nchw);
  d.user_wei = memory::desc(wei, wt, g.groups == 1 ? Tag::oihw : Tag::goihw);
  d.src = memory::desc(src, act, Tag::any);
  d.dst = memory::desc(dst, act, Tag::any);
  d.wei = memory::desc(wei, wt, Tag::any);
  d.bias = memory::desc({g.oc}, bias_dt, Tag::x);
  d.strides = {g.sh, g.sw};
  d.dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts the inserted gaps
  d.pad_l = {g.ph, g.pw};
  // PyTorch floors the output size, so the right padding can be smaller than the left one
  // (even negative: trailing input rows no window reaches).
  d.pad_r = {(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.ih - g.ph,
             (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.iw - g.pw};
  return d;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool bias,
                                                     const dnnl::primitive_attr& attr) {
  using F = dnnl::convolution_forward;
  auto desc = bias ? F::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                             d.src, d.wei, d.bias, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                   : F::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                             d.src, d.wei, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return F::primitive_desc(desc, attr, cpu_engine());
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

std::string geometry_str(const ConvGeometry& g) {
  return fmt::format(
      "input [{}, {}, {}, {}], weight [{}, {}, {}, {}], stride ({}, {}), padding ({}, {}), "
      "dilation ({}, {}), groups {}",
      g.n, g.ic, g.ih, g.iw, g.oc, g.ic / g.groups, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw,
      g.groups);
}

}  // namespace

void onednn_conv_forward(DType dtype, const ConvGeometry& g, const void* src, const void* wei,
                         const void* bias, void* dst) {
  const bool has_bias = bias != nullptr;
  Entry e = cache().get(make_key(Pass::kForward, dtype, g, has_bias), [&] {
    const auto dt = to_dnnl(dtype, "conv2d");
    const Descs d = make_descs(g, dt, dt, dt);
    Entry n;
    try {
      auto pd = forward_pd(d, has_bias, user_scratchpad());
      n.prim = dnnl::convolution_forward(pd);
      n.scratch = pd.scratchpad_desc();
      n.src = pd.src_desc();
      n.wei = pd.weights_desc();
      n.dst = pd.dst_desc();
    } catch (const dnnl::error& err) {
      fail("conv2d", "oneDNN could not create a {} convolution for {}: {}", dtype.name(),
           geometry_str(g), err.what());
    }
    n.bias = d.bias;
    n.user_src = d.user_src;
    n.user_wei = d.user_wei;
    n.user_dst = d.user_dst;
    return n;
  });
  const dnnl::engine& eng = cpu_engine();
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, input_memory(e.src, e.user_src, src, kSlotSrc));
  args.emplace(DNNL_ARG_WEIGHTS, input_memory(e.wei, e.user_wei, wei, kSlotWei));
  if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<void*>(bias)));
  const memory out = output_memory(e.dst, e.user_dst, dst, kSlotDst);
  args.emplace(DNNL_ARG_DST, out);
  execute_on_this_thread(e.prim, e.scratch, args);
  finish_output(out, e.user_dst, dst);
}

namespace {

Entry backward_data_entry(DType dtype, const ConvGeometry& g) {
  return cache().get(make_key(Pass::kBackwardData, dtype, g, false), [&] {
    const auto dt = to_dnnl(dtype, "conv2d");
    const Descs d = make_descs(g, dt, dt, dt);
    Entry n;
    try {
      auto hint = forward_pd(d, false, dnnl::primitive_attr());
      using B = dnnl::convolution_backward_data;
      B::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei, d.dst, d.strides, d.dilates,
                   d.pad_l, d.pad_r);
      B::primitive_desc pd(desc, user_scratchpad(), cpu_engine(), hint);
      n.prim = B(pd);
      n.scratch = pd.scratchpad_desc();
      n.src = pd.diff_src_desc();
      n.wei = pd.weights_desc();
      n.dst = pd.diff_dst_desc();
    } catch (const dnnl::error& err) {
      fail("conv2d", "oneDNN could not create a {} backward-data convolution for {}: {}",
           dtype.name(), geometry_str(g), err.what());
    }
    n.user_src = d.user_src;
    n.user_wei = d.user_wei;
    n.user_dst = d.user_dst;
    return n;
  });
}

Entry backward_weights_entry(DType dtype, const ConvGeometry& g, bool has_bias) {
  return cache().get(make_key(Pass::kBackwardWeights, dtype, g, has_bias), [&] {
    const auto dt = to_dnnl(dtype, "conv2d");
    const Descs d = make_descs(g, dt, dt, dt);
    const Descs w = make_descs(g, dt, memory::data_type::f32, memory::data_type::f32);
    Entry n;
    try {
      auto hint = forward_pd(d, has_bias, dnnl::primitive_attr());
      using B = dnnl::convolution_backward_weights;
      auto desc = has_bias ? B::desc(dnnl::algorithm::convolution_direct, d.src, w.wei, w.bias,
                                     d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                           : B::desc(dnnl::algorithm::convolution_direct, d.src, w.wei, d.dst,
                                     d.strides, d.dilates, d.pad_l, d.pad_r);
      B::primitive_desc pd(desc, user_scratchpad(), cpu_engine(), hint);
      n.prim = B(pd);
      n.scratch = pd.scratchpad_desc();
      n.src = pd.src_desc();
      n.wei = pd.diff_weights_desc();
      n.dst = pd.diff_dst_desc();
    } catch (const dnnl::error& err) {
      fail("conv2d", "oneDNN could not create a {} backward-weights convolution for {}: {}",
           dtype.name(), geometry_str(g), err.what());
    }
    n.bias = w.bias;
    n.user_src = d.user_src;
    n.user_wei = w.user_wei;
    n.user_dst = d.user_dst;
    return n;
  });
}

}  // namespace

void onednn_conv_backward(DType dtype, const ConvGeometry& g, const void* src, const void* diff_dst,
                          const void* wei, void* diff_src, float* diff_wei, float* diff_bias) {
  const dnnl::engine& eng = cpu_engine();
  // diff_dst staged for the data pass, kept in its slot for the weights pass: the two passes
  // usually want the same blocked layout, and the reorder is as costly as a small convolution.
  memory dd;
  memory::desc dd_desc;
  if (diff_src != nullptr) {
    const Entry e = backward_data_entry(dtype, g);
    dd = input_memory(e.dst, e.user_dst, diff_dst, kSlotDst);
    dd_desc = e.dst;
    std::unordered_map<int, memory> args;
    args.emplace(DNNL_ARG_DIFF_DST, dd);
    args.emplace(DNNL_ARG_WEIGHTS, input_memory(e.wei, e.user_wei, wei, kSlotWei));
    const memory out = output_memory(e.src, e.user_src, diff_src, kSlotSrc);
    args.emplace(DNNL_ARG_DIFF_SRC, out);
    execute_on_this_thread(e.prim, e.scratch, args);
    finish_output(out, e.user_src, diff_src);
  }
  if (diff_wei == nullptr) return;
  const bool has_bias = diff_bias != nullptr;
  const Entry e = backward_weights_entry(dtype, g, has_bias);
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, input_memory(e.src, e.user_src, src, kSlotSrc));
  args.emplace(DNNL_ARG_DIFF_DST, diff_src != nullptr && dd_desc == e.dst
                                      ? dd
                                      : input_memory(e.dst, e.user_dst, diff_dst, kSlotDst));
  const memory out = output_memory(e.wei, e.user_wei, diff_wei, kSlotWei);
  args.emplace(DNNL_ARG_DIFF_WEIGHTS, out);
  if (has_bias) args.emplace(DNNL_ARG_DIFF_BIAS, memory(e.bias, eng, diff_bias));
  execute_on_this_thread(e.prim, e.scratch, args);
  finish_output(out, e.user_wei, diff_wei);
}

size_t onednn_conv_cache_size() { return cache().size(); }
void onednn_conv_clear_cache() { cache().clear(); }

}  // namespace mantissa::kernels
