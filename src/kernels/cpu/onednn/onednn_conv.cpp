#include "kernels/cpu/onednn/onednn_conv.h"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/onednn/blocked_convert.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/primitive_cache.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Per-thread staging buffers for the reordered operands, one per slot, grown on demand and
// reused (a fresh allocation per call would page-fault megabytes every step). kSlotPlain holds a
// widened or not-yet-rounded operand in its plain layout where no one-pass conversion applies.
enum Slot { kSlotSrc = 0, kSlotWei = 1, kSlotDst = 2, kSlotPlain = 3, kSlotCount = 4 };
void* thread_buffer(Slot slot, size_t bytes) {
  thread_local GrowableBuffer bufs[kSlotCount];
  return bufs[slot].get(bytes, "conv2d");
}

// One operand as the caller holds it: plain layout in the caller's dtype (`user`), the same
// layout in the primitive's dtype (`plain`), and for an activation its N, C and H*W (c = 0 for a
// weight), which the one-pass conversions to and from the blocked layouts need.
struct Operand {
  memory::desc user, plain;
  int64_t n = 0, c = 0, hw = 0;
  // The channel block of the primitive's layout for this operand when the one-pass conversions
  // apply (channel_block), else 0; set once per cached primitive (set_operands).
  int64_t block = 0;
};

// The channel block of an activation layout the one-pass conversions handle (nChw8c or
// nChw16c, no padded channels), else 0.
int64_t channel_block(const memory::desc& want, const Operand& op) {
  if (op.c == 0 || want.data_type() != memory::data_type::f32) return 0;
  const memory::dims dims = want.dims();
  for (const int64_t block : {8, 16}) {
    if (want == memory::desc(dims, memory::data_type::f32, block == 8 ? Tag::nChw8c : Tag::nChw16c))
      return blocked_convert_applies(dtype_of(op.user), op.c, block) ? block : 0;
  }
  return 0;
}

// An input in the layout and dtype the primitive wants: the caller's buffer itself when they
// agree, else a reorder (and, for bf16/f16 data of a float32 primitive, a widening) into a
// staging buffer: one pass into nChw8c/nChw16c, else widened in place or into kSlotPlain and
// reordered from there.
memory input_memory(const memory::desc& want, const Operand& op, const void* data, Slot slot) {
  const dnnl::engine& eng = cpu_engine();
  memory user_mem(op.user, eng, const_cast<void*>(data));
  if (want == op.user) return user_mem;
  memory staged(want, eng, thread_buffer(slot, want.get_size()));
  if (want.data_type() == op.user.data_type()) {
    dnnl::reorder(user_mem, staged).execute(thread_stream(), user_mem, staged);
    return staged;
  }
  const DType from = dtype_of(op.user), to = dtype_of(want);
  const int64_t numel = static_cast<int64_t>(op.plain.get_size() / to.itemsize());
  if (op.block > 0) {
    widen_to_blocked(from, static_cast<const uint16_t*>(data),
                     static_cast<float*>(staged.get_data_handle()), op.n, op.c, op.hw, op.block);
  } else if (want == op.plain) {
    convert_buffer(data, from, staged.get_data_handle(), to, numel);
  } else {
    memory plain(op.plain, eng, thread_buffer(kSlotPlain, op.plain.get_size()));
    convert_buffer(data, from, plain.get_data_handle(), to, numel);
    dnnl::reorder(plain, staged).execute(thread_stream(), plain, staged);
  }
  return staged;
}

// An output: the caller's buffer when the layouts and dtypes agree, else a staging buffer that
// finish_output reorders (and rounds) into the caller's buffer after the primitive ran.
memory output_memory(const memory::desc& want, const Operand& op, void* data, Slot slot) {
  if (want == op.user) return memory(op.user, cpu_engine(), data);
  return memory(want, cpu_engine(), thread_buffer(slot, want.get_size()));
}

void finish_output(const memory& produced, const Operand& op, void* data) {
  if (produced.get_data_handle() == data) return;
  const dnnl::engine& eng = cpu_engine();
  const memory::desc want = produced.get_desc();
  memory user_mem(op.user, eng, data);
  if (want.data_type() == op.user.data_type()) {
    dnnl::reorder(produced, user_mem)
        .execute(thread_stream(), const_cast<memory&>(produced), user_mem);
    return;
  }
  const DType from = dtype_of(want), to = dtype_of(op.user);
  const int64_t numel = static_cast<int64_t>(op.plain.get_size() / from.itemsize());
  if (op.block > 0) {
    round_from_blocked(to, static_cast<const float*>(produced.get_data_handle()),
                       static_cast<uint16_t*>(data), op.n, op.c, op.hw, op.block);
  } else if (want == op.plain) {
    convert_buffer(produced.get_data_handle(), from, data, to, numel);
  } else {
    memory plain(op.plain, eng, thread_buffer(kSlotPlain, op.plain.get_size()));
    dnnl::reorder(produced, plain).execute(thread_stream(), const_cast<memory&>(produced), plain);
    convert_buffer(plain.get_data_handle(), from, data, to, numel);
  }
}

enum class Pass : int64_t { kForward = 0, kBackwardData = 1, kBackwardWeights = 2 };

// The primitive with the layouts it wants (src, wei, dst: oneDNN's blocked formats, picked with
// format_tag::any) and the caller's operands (plain layouts, the caller's dtype).
struct Entry {
  dnnl::primitive prim;
  memory::desc src, wei, bias, dst, scratch;
  Operand user_src, user_wei, user_dst;
};

// The caller's operands of a new entry, each with its channel block for the primitive's layout.
void set_operands(Entry& n, Operand src, Operand wei, Operand dst) {
  src.block = channel_block(n.src, src);
  wei.block = channel_block(n.wei, wei);
  dst.block = channel_block(n.dst, dst);
  n.user_src = src;
  n.user_wei = wei;
  n.user_dst = dst;
}

using Key = PrimitiveKey;

PrimitiveCache<Entry>& cache() {
  static PrimitiveCache<Entry> c(kOnednnConvCacheCapacity);
  return c;
}

Key make_key(Pass pass, DType dt, DType io, const ConvGeometry& g, bool bias) {
  return {static_cast<int64_t>(pass),
          static_cast<int64_t>(dt.id()),
          static_cast<int64_t>(io.id()),
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
// The caller's activations are of dtype `io` and its weights of `wei_io` (user_*): the
// primitive's, or bf16/f16 converted on the way in and out of a float32 primitive.
struct Descs {
  memory::desc src, wei, bias, dst;
  Operand user_src, user_wei, user_dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

Descs make_descs(const ConvGeometry& g, memory::data_type act, memory::data_type wt,
                 memory::data_type bias_dt, memory::data_type io, memory::data_type wei_io) {
  Descs d;
  const memory::dims src{g.n, g.ic, g.ih, g.iw}, dst{g.n, g.oc, g.oh, g.ow};
  const memory::dims wei =
      g.groups == 1 ? memory::dims{g.oc, g.ic, g.kh, g.kw}
                    : memory::dims{g.groups, g.oc / g.groups, g.ic / g.groups, g.kh, g.kw};
  const Tag wei_tag = g.groups == 1 ? Tag::oihw : Tag::goihw;
  d.user_src = {memory::desc(src, io, Tag::nchw), memory::desc(src, act, Tag::nchw), g.n, g.ic,
                g.ih * g.iw};
  d.user_dst = {memory::desc(dst, io, Tag::nchw), memory::desc(dst, act, Tag::nchw), g.n, g.oc,
                g.oh * g.ow};
  d.user_wei = {memory::desc(wei, wei_io, wei_tag), memory::desc(wei, wt, wei_tag)};
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

void onednn_conv_forward(DType dtype, DType io, const ConvGeometry& g, const void* src,
                         const void* wei, const void* bias, void* dst) {
  const bool has_bias = bias != nullptr;
  Entry e = cache().get(make_key(Pass::kForward, dtype, io, g, has_bias), [&] {
    const auto dt = to_dnnl(dtype, "conv2d"), user = to_dnnl(io, "conv2d");
    const Descs d = make_descs(g, dt, dt, dt, user, user);
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
    set_operands(n, d.user_src, d.user_wei, d.user_dst);
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

Entry backward_data_entry(DType dtype, DType io, const ConvGeometry& g) {
  return cache().get(make_key(Pass::kBackwardData, dtype, io, g, false), [&] {
    const auto dt = to_dnnl(dtype, "conv2d"), user = to_dnnl(io, "conv2d");
    const Descs d = make_descs(g, dt, dt, dt, user, user);
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
    set_operands(n, d.user_src, d.user_wei, d.user_dst);
    return n;
  });
}

Entry backward_weights_entry(DType dtype, DType io, const ConvGeometry& g, bool has_bias) {
  return cache().get(make_key(Pass::kBackwardWeights, dtype, io, g, has_bias), [&] {
    const auto dt = to_dnnl(dtype, "conv2d"), user = to_dnnl(io, "conv2d");
    const auto f32 = memory::data_type::f32;
    const Descs d = make_descs(g, dt, dt, dt, user, user);
    const Descs w = make_descs(g, dt, f32, f32, user, f32);
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
    set_operands(n, d.user_src, w.user_wei, d.user_dst);
    return n;
  });
}

}  // namespace

void onednn_conv_backward(DType dtype, DType io, const ConvGeometry& g, const void* src,
                          const void* diff_dst, const void* wei, void* diff_src, float* diff_wei,
                          float* diff_bias) {
  const dnnl::engine& eng = cpu_engine();
  // diff_dst staged for the data pass, kept in its slot for the weights pass: the two passes
  // usually want the same blocked layout, and the reorder is as costly as a small convolution.
  memory dd;
  memory::desc dd_desc;
  if (diff_src != nullptr) {
    const Entry e = backward_data_entry(dtype, io, g);
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
  const Entry e = backward_weights_entry(dtype, io, g, has_bias);
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
