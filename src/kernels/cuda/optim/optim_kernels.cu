// Optimizer updates and gradient norms on a GPU (optim_kernels.h). One grid-stride kernel per
// parameter; each element's update is the CPU's (optim/adam.cpp, optim/sgd.cpp,
// kernels/cpu/optim/adam_span_impl.h, optim/fused_loop.h) operation for operation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/cuda/launch.h"
#include "kernels/cuda/common/device_math.cuh"
#include "kernels/cuda/optim/optim_kernels.h"

namespace mantissa::cuda::detail {
namespace {

// The parameter's value as the update sees it: the fp32 master (restarted from the parameter
// where something else wrote the parameter), or the parameter widened.
template <typename T, typename A>
__device__ __forceinline__ A load_param(const T* param, const float* master, int64_t i) {
  if constexpr (!std::is_same<T, A>::value) {
    if (master != nullptr) {
      float mp = master[i];
      T rounded;
      store(&rounded, mp);
      if (bits(rounded) != bits(param[i])) mp = load(param + i);
      return mp;
    }
  }
  return load(param + i);
}

template <typename T, typename A>
__device__ __forceinline__ void store_param(T* param, float* master, int64_t i, A p) {
  if constexpr (!std::is_same<T, A>::value) {
    if (master != nullptr) master[i] = p;
  }
  store(param + i, p);
}

// One element's Adam/AdamW update, operation for operation as the CPU's.
template <typename T, typename S>
__device__ __forceinline__ void adam_element(const AdamUpdate& u, T* param, const T* grad, S* m_buf,
                                             S* v_buf, S* vmax_buf, float* master, int64_t i) {
  using A = typename AccOf<T>::type;
  const A sign = static_cast<A>(u.sign), beta1 = static_cast<A>(u.beta1),
          omb1 = static_cast<A>(u.one_minus_beta1), beta2 = static_cast<A>(u.beta2),
          omb2 = static_cast<A>(u.one_minus_beta2), neg_step = static_cast<A>(u.neg_step_size),
          bc2 = static_cast<A>(u.bias_corr2_sqrt), eps = static_cast<A>(u.eps),
          wd = static_cast<A>(u.weight_decay), decay = static_cast<A>(u.decay_factor);
  A p = load_param<T, A>(param, master, i);
  A d = load(grad + i);
  A m = load(m_buf + i), v = load(v_buf + i);
  d = mul(d, sign);
  p = mul(p, decay);
  if (u.l2) d = add(d, mul(wd, p));
  m = add(mul(m, beta1), mul(omb1, d));
  v = add(mul(v, beta2), mul(mul(omb2, d), d));
  A second = v;
  if (u.amsgrad) {
    const A vmax = max_nan(v, static_cast<A>(load(vmax_buf + i)));
    store(vmax_buf + i, vmax);
    second = vmax;
  }
  const A denom = add(div(sqrt_rn(second), bc2), eps);
  p = add(p, div(mul(neg_step, m), denom));
  store(m_buf + i, m);
  store(v_buf + i, v);
  store_param<T, A>(param, master, i, p);
}

template <typename T, typename S>
__global__ void adam_kernel(AdamUpdate u) {
  T* param = static_cast<T*>(u.param);
  const T* grad = static_cast<const T*>(u.grad);
  S* m_buf = static_cast<S*>(u.exp_avg);
  S* v_buf = static_cast<S*>(u.exp_avg_sq);
  S* vmax_buf = static_cast<S*>(u.max_exp_avg_sq);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < u.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    adam_element<T, S>(u, param, grad, m_buf, v_buf, vmax_buf, u.master, i);
}

// ---- Several parameters per launch: the tensors' pointers travel in the kernel's parameter
// space (under its 4 KiB), blocks are dealt out to the tensors in order, kAdamChunk elements
// per block.
constexpr int kAdamTensors = 40;
constexpr int64_t kAdamChunk = 256 * 8;

struct AdamTensor {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;
  float* master;
  int64_t n;
  int64_t first_block;
};
struct AdamBatch {
  AdamTensor t[kAdamTensors];
  int count;
};

template <typename T, typename S>
__global__ void adam_multi_kernel(AdamUpdate u, AdamBatch b) {
  int k = 0;
  while (k + 1 < b.count && b.t[k + 1].first_block <= static_cast<int64_t>(blockIdx.x)) ++k;
  const AdamTensor& t = b.t[k];
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - t.first_block) * kAdamChunk;
  const int64_t end = begin + kAdamChunk < t.n ? begin + kAdamChunk : t.n;
  T* param = static_cast<T*>(t.param);
  const T* grad = static_cast<const T*>(t.grad);
  S* m_buf = static_cast<S*>(t.exp_avg);
  S* v_buf = static_cast<S*>(t.exp_avg_sq);
  S* vmax_buf = static_cast<S*>(t.max_exp_avg_sq);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    adam_element<T, S>(u, param, grad, m_buf, v_buf, vmax_buf, t.master, i);
}

// The scalars, flags and types of two updates are the same: one launch can do both.
bool same_launch(const AdamUpdate& a, const AdamUpdate& b) {
  return a.param_type == b.param_type && a.state_type == b.state_type && a.sign == b.sign &&
         a.beta1 == b.beta1 && a.one_minus_beta1 == b.one_minus_beta1 && a.beta2 == b.beta2 &&
         a.one_minus_beta2 == b.one_minus_beta2 && a.neg_step_size == b.neg_step_size &&
         a.bias_corr2_sqrt == b.bias_corr2_sqrt && a.eps == b.eps &&
         a.weight_decay == b.weight_decay && a.decay_factor == b.decay_factor && a.l2 == b.l2 &&
         a.amsgrad == b.amsgrad;
}

template <typename T, typename S>
__global__ void sgd_kernel(SgdUpdate u) {
  using A = typename AccOf<T>::type;
  T* param = static_cast<T*>(u.param);
  const T* grad = static_cast<const T*>(u.grad);
  S* buf = static_cast<S*>(u.momentum_buffer);
  const A sign = static_cast<A>(u.sign), neg_lr = static_cast<A>(u.neg_lr),
          momentum = static_cast<A>(u.momentum), omd = static_cast<A>(u.one_minus_dampening),
          wd = static_cast<A>(u.weight_decay);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < u.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A p = load_param<T, A>(param, u.master, i);
    A d = load(grad + i);
    d = mul(d, sign);
    if (u.decay) d = add(d, mul(wd, p));
    if (buf != nullptr) {
      // The first step starts the buffer at the gradient itself (no dampening).
      const A b = u.first ? d : add(mul(static_cast<A>(load(buf + i)), momentum), mul(omd, d));
      store(buf + i, b);
      d = u.nesterov ? add(d, mul(momentum, b)) : b;
    }
    p = add(p, mul(neg_lr, d));
    store_param<T, A>(param, u.master, i, p);
  }
}

template <typename T, typename S, typename Update, typename Kernel>
void launch_one(const Update& u, Kernel kernel, const char* name) {
  kernel<<<grid_for(u.n), 256, 0, current_stream()>>>(u);
  check_kernel_launch(name);
}

// Calls f(T{}, S{}) for the (parameter, state) type pairs the optimizers keep on a GPU.
template <typename F>
bool dispatch_pair(Scalar pt, Scalar st, F&& f) {
  if (pt == Scalar::f64 && st == Scalar::f64) return f(double{}, double{}), true;
  if (pt == Scalar::f32 && st == Scalar::f32) return f(float{}, float{}), true;
  if (pt == Scalar::f16 && st == Scalar::f16) return f(__half{}, __half{}), true;
  if (pt == Scalar::f16 && st == Scalar::f32) return f(__half{}, float{}), true;
  if (pt == Scalar::bf16 && st == Scalar::bf16) return f(__nv_bfloat16{}, __nv_bfloat16{}), true;
  if (pt == Scalar::bf16 && st == Scalar::f32) return f(__nv_bfloat16{}, float{}), true;
  return false;
}

// ---- norms ----

template <typename T>
__global__ void norm_kernel(const T* x, int64_t n, NormKind kind, double* acc) {
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double a = fabs(static_cast<double>(load(x + i)));
    if (kind == NormKind::kL1)
      s += a;
    else if (kind == NormKind::kL2)
      s += a * a;
    else
      s = max_nan(a, s);
  }
  // Warp, then block: one atomic per block.
  for (int off = 16; off > 0; off >>= 1) {
    const double o = __shfl_down_sync(0xffffffffu, s, off);
    s = kind == NormKind::kMax ? max_nan(o, s) : s + o;
  }
  __shared__ double warp_part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_part[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = warp_part[0];
    for (int w = 1; w < static_cast<int>((blockDim.x + 31) / 32); ++w)
      b = kind == NormKind::kMax ? max_nan(warp_part[w], b) : b + warp_part[w];
    if (kind == NormKind::kMax)
      // |x| >= 0 (or a NaN with a clear sign bit): its bits order like the values, and NaN's
      // bits exceed +inf's, so an integer max is max_nan.
      atomicMax(reinterpret_cast<unsigned long long*>(acc),
                static_cast<unsigned long long>(__double_as_longlong(b)));
    else
      atomicAdd(acc, b);
  }
}

__device__ double round_to(double v, bool f64) {
  return f64 ? v : static_cast<double>(__double2float_rn(v));
}

__global__ void norm_finish_kernel(const double* accs, int64_t count, NormKind kind,
                                   bool result_f64, double* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double acc = 0.0;
  bool nan = false;
  for (int64_t t = 0; t < count; ++t) {
    const double r = accs[t];
    const double norm = round_to(kind == NormKind::kL2 ? sqrt(r) : r, result_f64);
    if (norm != norm) nan = true;
    if (kind == NormKind::kMax)
      acc = norm > acc ? norm : acc;
    else
      acc += kind == NormKind::kL2 ? norm * norm : norm;
  }
  const double total =
      nan ? __longlong_as_double(0x7ff8000000000000LL) : (kind == NormKind::kL2 ? sqrt(acc) : acc);
  out[0] = round_to(total, result_f64);
}

template <typename T>
__global__ void scale_kernel(T* x, int64_t n, double coef) {
  using A = typename AccOf<T>::type;
  const A c = static_cast<A>(coef);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(x + i, mul(static_cast<A>(load(x + i)), c));
}

template <typename F>
bool dispatch_float(Scalar t, F&& f) {
  switch (t) {
    case Scalar::f64:
      return f(double{}), true;
    case Scalar::f32:
      return f(float{}), true;
    case Scalar::f16:
      return f(__half{}), true;
    case Scalar::bf16:
      return f(__nv_bfloat16{}), true;
    default:
      return false;
  }
}

}  // namespace

bool launch_adam_update(const AdamUpdate& u) {
  return dispatch_pair(u.param_type, u.state_type, [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    if (u.n == 0) return;
    launch_one<T, S>(u, adam_kernel<T, S>, "adam_update");
  });
}

bool launch_adam_updates(const AdamUpdate* us, int64_t count) {
  int64_t i = 0;
  while (i < count) {
    // The run of updates from i that share the launch's scalars, up to kAdamTensors of them.
    AdamBatch b{};
    b.count = 0;
    int64_t blocks = 0;
    const AdamUpdate& head = us[i];
    int64_t j = i;
    for (; j < count && b.count < kAdamTensors && same_launch(head, us[j]); ++j) {
      const AdamUpdate& u = us[j];
      if (u.n == 0) continue;
      b.t[b.count++] = {u.param,          u.grad,   u.exp_avg, u.exp_avg_sq,
                        u.max_exp_avg_sq, u.master, u.n,       blocks};
      blocks += (u.n + kAdamChunk - 1) / kAdamChunk;
    }
    const bool known = dispatch_pair(head.param_type, head.state_type, [&](auto t, auto s) {
      using T = decltype(t);
      using S = decltype(s);
      if (b.count == 0) return;
      adam_multi_kernel<T, S><<<static_cast<unsigned>(blocks), 256, 0, current_stream()>>>(head, b);
      check_kernel_launch("adam_update");
    });
    if (!known) return false;
    i = j;
  }
  return true;
}

bool launch_sgd_update(const SgdUpdate& u) {
  return dispatch_pair(u.param_type, u.state_type, [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    if (u.n == 0) return;
    launch_one<T, S>(u, sgd_kernel<T, S>, "sgd_update");
  });
}

bool launch_norm_partial(const void* data, Scalar type, int64_t n, NormKind kind, double* acc) {
  return dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    const unsigned blocks = grid_for(n) < 1024u ? grid_for(n) : 1024u;
    norm_kernel<T><<<blocks, 256, 0, current_stream()>>>(static_cast<const T*>(data), n, kind, acc);
    check_kernel_launch("norm_partial");
  });
}

void launch_norm_finish(const double* accs, int64_t count, NormKind kind, bool result_f64,
                        double* out) {
  norm_finish_kernel<<<1, 1, 0, current_stream()>>>(accs, count, kind, result_f64, out);
  check_kernel_launch("norm_finish");
}

bool launch_scale_inplace(void* data, Scalar type, int64_t n, double coef) {
  return dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    scale_kernel<T><<<grid_for(n), 256, 0, current_stream()>>>(static_cast<T*>(data), n, coef);
    check_kernel_launch("scale_inplace");
  });
}

}  // namespace mantissa::cuda::detail
