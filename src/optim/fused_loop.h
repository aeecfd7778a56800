#pragma once
// Shared machinery of the fused optimizer loops.
//
// SGD's update is written once as a template over its arithmetic type X: the scalar type A
// (float or double) or a 16-byte SIMD pack of A (GCC vector extensions; SSE2 is part of every
// x86-64, so no run-time dispatch is needed). Packs apply the same IEEE operations in the same
// order as the scalar code, so every element gets bit-identical results whichever path or
// thread handles it. (Adam's kernels go wider, chosen at run time: adam_kernels.h.)
// f16/bf16 parameters (and their state, when it is kept in the half dtype) are converted to
// fp32 in blocks (for_blocks) by both optimizers.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "mantissa/core/convert.h"
#include "mantissa/optim/optimizer.h"
#include "optim/stochastic_round.h"

namespace mantissa::optim::detail {

using f32x4 = float __attribute__((vector_size(16)));
using f64x2 = double __attribute__((vector_size(16)));

template <typename A>
struct Pack;
template <>
struct Pack<float> {
  using type = f32x4;
  static constexpr int kWidth = 4;
};
template <>
struct Pack<double> {
  using type = f64x2;
  static constexpr int kWidth = 2;
};

template <typename V>
inline V load_pack(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store_pack(void* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// Splits [0, n) into one contiguous range per thread (a fixed partition for a given thread
// count) and calls body(begin, end) on each; single-threaded below the parallel grain.
template <typename F>
void parallel_ranges(int64_t n, F&& body) {
  if (n <= kernels::kParallelGrain) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    // Range edges on multiples of 16 elements keep each thread's packs aligned alike.
    const int64_t per = ((n + threads - 1) / threads + 15) / 16 * 16;
    const int64_t begin = std::min(n, t * per);
    const int64_t end = std::min(n, begin + per);
    if (begin < end) body(begin, end);
  }
}

// Calls pack(i) for each full pack of Pack<A>::kWidth elements starting at i, then elem(i)
// for the remaining elements of [0, count).
template <typename A, typename PackFn, typename ElemFn>
inline void pack_loop(int64_t count, PackFn&& pack, ElemFn&& elem) {
  constexpr int64_t W = Pack<A>::kWidth;
  int64_t i = 0;
  for (; i + W <= count; i += W) pack(i);
  for (; i < count; ++i) elem(i);
}

// Where one parameter's update reads and writes its memory.
inline constexpr int kMaxStates = 3;
template <typename T>
struct UpdateIo {
  T* param = nullptr;
  const T* grad = nullptr;
  // Optimizer state buffers, in the order the update expects them: arrays of acc_t<T>, or of T
  // for half parameters with half_state.
  void* state[kMaxStates] = {};
  int num_states = 0;
  // Half parameters only (see docs/half_precision.md):
  float* master = nullptr;  // fp32 master copy: updated instead of param, which gets its RNE
  bool half_state = false;  // state holds T: loaded to fp32, rounded (RNE) once when stored
  bool stochastic = false;  // param stored with stochastic rounding from stream sr_key
  uint64_t sr_key = 0;
};

// Hands the parameter, gradient and state elements [begin, end) to
// block(p, g, states, count) as arrays of the arithmetic type A (states[k] for io.state[k]).
// For f32/f64 these are the tensors' own memory. For f16/bf16 they are fp32 copies of one block
// at a time (converted with the SIMD converters), written back after block() updates them:
// state by RNE (once), the parameter by RNE or stochastic rounding, or, with a master copy, the
// master is updated in place and the parameter becomes its RNE rounding.
template <typename T, typename Block>
inline void for_blocks(const UpdateIo<T>& io, int64_t begin, int64_t end, Block&& block) {
  using A = kernels::acc_t<T>;
  A* states[kMaxStates] = {};
  if constexpr (std::is_same_v<T, A>) {
    for (int k = 0; k < io.num_states; ++k) states[k] = static_cast<A*>(io.state[k]) + begin;
    block(io.param + begin, io.grad + begin, static_cast<A* const*>(states), end - begin);
  } else {
    constexpr int64_t kBlock = 512;
    constexpr DType dt = dtype_of<T>();
    alignas(64) A pb[kBlock];
    alignas(64) A gb[kBlock];
    alignas(64) A sb[kMaxStates][kBlock];
    alignas(64) T rounded[kBlock];
    for (int64_t s = begin; s < end; s += kBlock) {
      const int64_t count = std::min(kBlock, end - s);
      A* p = pb;
      if (io.master) {
        // Something else wrote the parameter (weights loaded after the optimizer was built):
        // the master follows it, so a step never reverts the new value.
        p = io.master + s;
        convert_buffer(p, kFloat32, rounded, dt, count);
        for (int64_t i = 0; i < count; ++i)
          if (rounded[i].x != io.param[s + i].x) p[i] = static_cast<float>(io.param[s + i]);
      } else {
        convert_buffer(io.param + s, dt, pb, kFloat32, count);
      }
      convert_buffer(io.grad + s, dt, gb, kFloat32, count);
      for (int k = 0; k < io.num_states; ++k) {
        if (io.half_state) {
          states[k] = sb[k];
          convert_buffer(static_cast<const T*>(io.state[k]) + s, dt, sb[k], kFloat32, count);
        } else {
          states[k] = static_cast<A*>(io.state[k]) + s;
        }
      }
      block(p, static_cast<const A*>(gb), static_cast<A* const*>(states), count);
      if (io.half_state)
        for (int k = 0; k < io.num_states; ++k)
          convert_buffer(sb[k], kFloat32, static_cast<T*>(io.state[k]) + s, dt, count);
      if (io.stochastic)
        stochastic_round_buffer(p, dt, reinterpret_cast<uint16_t*>(io.param + s), count, io.sr_key,
                                static_cast<uint64_t>(s));
      else
        convert_buffer(p, kFloat32, io.param + s, dt, count);
    }
  }
}

// The UpdateIo of parameter p with gradient g and state buffers `states` (allocated in the
// group's state dtype); st supplies the master copy, `sr_key` the stochastic-rounding stream.
template <typename T>
UpdateIo<T> update_io(const Tensor& p, const Tensor& g, const std::vector<Tensor>& states,
                      const ParamState& st, const HalfPrecisionOptions& h, uint64_t sr_key) {
  UpdateIo<T> io;
  p.storage()->bump_version();  // the parameter is written in place below
  io.param = p.data<T>();
  io.grad = g.data<T>();
  io.num_states = static_cast<int>(states.size());
  for (size_t k = 0; k < states.size(); ++k) io.state[k] = states[k].data_ptr();
  if constexpr (!std::is_same_v<T, kernels::acc_t<T>>) {
    auto m = st.buffers.find("master_param");
    if (m != st.buffers.end()) io.master = m->second.template data<float>();
    io.half_state = !states.empty() && states[0].dtype() == p.dtype();
    io.stochastic = h.stochastic_rounding && io.master == nullptr;
    io.sr_key = sr_key;
  }
  return io;
}

}  // namespace mantissa::optim::detail
