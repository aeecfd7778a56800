// conv2d's CUDA branch (conv_cuda.h) on cuDNN's legacy convolution API (cudnn_cnn.h): one
// cudnnHandle per GPU, bound to that GPU's one stream before each call; descriptors made per
// call (host-only, cheap); the algorithm of each (direction, shape, dtype, math) chosen once by
// cuDNN's heuristic (the _v7 queries) and kept; workspaces from the caching allocator.
#include "kernels/cuda/conv/conv_cuda.h"

#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include <fmt/format.h>

#include <cctype>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "kernels/cuda/conv/cudnn_api.h"
#include "mantissa/core/cuda.h"

namespace mantissa::kernels {
namespace {

using kernels::cuda::cudnn_api;
using mantissa::cuda::detail::current_stream;

enum class Direction { kForward = 0, kBackwardData = 1, kBackwardWeight = 2 };

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::kForward:
      return "forward";
    case Direction::kBackwardData:
      return "input gradient";
    case Direction::kBackwardWeight:
      return "weight gradient";
  }
  return "?";
}

// What an error names: the direction, the shapes, the convolution's parameters and the dtype.
std::string describe(Direction d, const ConvGeometry& g, DType dt) {
  return fmt::format(
      "the {} of input [{}, {}, {}, {}] and weight [{}, {}, {}, {}] (output [{}, {}, {}, {}], "
      "stride ({}, {}), padding ({}, {}), dilation ({}, {}), groups={}, {})",
      direction_name(d), g.n, g.ic, g.ih, g.iw, g.oc, g.ic / g.groups, g.kh, g.kw, g.n, g.oc, g.oh,
      g.ow, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, dt.name());
}

// What an error names, formatted only when one is thrown (a convolution call formats nothing).
struct What {
  Direction dir;
  const ConvGeometry& g;
  DType dt;
  std::string str() const { return describe(dir, g, dt); }
};

// call: the checked expression's text; the error names the function alone.
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const std::string& what) {
  // The first cudnnXxx name in it (cudnn_api() is not one).
  const std::string text(call);
  std::string fn = text;
  for (size_t at = text.find("cudnn"); at != std::string::npos; at = text.find("cudnn", at + 1)) {
    if (at + 5 < text.size() && std::isupper(static_cast<unsigned char>(text[at + 5]))) {
      size_t end = at;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
        ++end;
      fn = text.substr(at, end - at);
      break;
    }
  }
  // cuDNN 9 keeps a longer explanation of the last failure on this thread.
  char detail[512] = {0};
  cudnn_api().cudnnGetLastErrorString(detail, sizeof(detail));
  fail("conv2d", "cuDNN failed in {}: {} returned {} ({}){}{}", what, fn,
       cudnn_api().cudnnGetErrorString(s), static_cast<int>(s), detail[0] != 0 ? ": " : "", detail);
}

[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const What& what) {
  throw_cudnn(s, call, what.str());
}

#define MANTISSA_CUDNN_CHECK(expr, what)              \
  do {                                                \
    const cudnnStatus_t mantissa_cudnn_st_ = (expr);  \
    if (mantissa_cudnn_st_ != CUDNN_STATUS_SUCCESS)   \
      throw_cudnn(mantissa_cudnn_st_, #expr, (what)); \
  } while (0)

// cuDNN's element and compute types: fp32 accumulation for the 16-bit types and float32, fp64
// for float64.
cudnnDataType_t data_type_of(DType dt) {
  if (dt == kFloat32) return CUDNN_DATA_FLOAT;
  if (dt == kFloat64) return CUDNN_DATA_DOUBLE;
  if (dt == kFloat16) return CUDNN_DATA_HALF;
  if (dt == kBFloat16) return CUDNN_DATA_BFLOAT16;
  fail("conv2d", "expected float64, float32, float16 or bfloat16 tensors on a GPU, got {}",
       dt.name());
}

cudnnDataType_t compute_type_of(DType dt) {
  return dt == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// The math type the descriptor allows: tensor cores for fp16/bf16; for float32 TF32 only when
// the caller allows it (CUDNN_DEFAULT_MATH lets cuDNN use TF32 on Ampere and later), else FMA
// kernels alone, so "highest" stays full fp32; cuDNN's default for float64.
cudnnMathType_t math_type_of(DType dt, bool allow_tf32) {
  if (dt == kFloat16 || dt == kBFloat16) return CUDNN_TENSOR_OP_MATH;
  if (dt == kFloat32) return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

bool full_fp32(DType dt, bool allow_tf32) { return dt == kFloat32 && !allow_tf32; }

int as_int(int64_t v, const ConvGeometry& g, DType dt) {
  MANTISSA_CHECK(v >= 0 && v <= INT_MAX, "conv2d",
                 "{} has a size beyond cuDNN's 32-bit dimensions ({})",
                 describe(Direction::kForward, g, dt), v);
  return static_cast<int>(v);
}

// The four descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    // All null when cuDNN could not be opened (cudnn_api() would throw again here).
    if (x == nullptr && y == nullptr && w == nullptr && conv == nullptr) return;
    const kernels::cuda::CudnnApi& api = cudnn_api();
    if (x != nullptr) api.cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) api.cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) api.cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) api.cudnnDestroyConvolutionDescriptor(conv);
  }
};

void set_nchw(cudnnTensorDescriptor_t d, cudnnDataType_t type, int n, int c, int h, int w,
              const What& what) {
  // Contiguous NCHW, written with its strides (Set4dEx).
  MANTISSA_CUDNN_CHECK(
      cudnn_api().cudnnSetTensor4dDescriptorEx(d, type, n, c, h, w, c * h * w, h * w, w, 1), what);
}

// x [N, C, H, W], w [OC, C / groups, KH, KW] and y [N, OC, OH, OW], contiguous, and the
// convolution (cross-correlation, as conv2d is) with its group count and math type.
void make_descriptors(Descriptors& d, const ConvGeometry& g, DType dt, cudnnMathType_t math,
                      const What& what) {
  const kernels::cuda::CudnnApi& api = cudnn_api();
  const cudnnDataType_t type = data_type_of(dt);
  auto i = [&](int64_t v) { return as_int(v, g, dt); };
  // Element counts too: cuDNN's legacy strides are 32-bit.
  (void)i(g.n * g.ic * g.ih * g.iw);
  (void)i(g.n * g.oc * g.oh * g.ow);
  (void)i(g.oc * (g.ic / g.groups) * g.kh * g.kw);
  MANTISSA_CUDNN_CHECK(api.cudnnCreateTensorDescriptor(&d.x), what);
  MANTISSA_CUDNN_CHECK(api.cudnnCreateTensorDescriptor(&d.y), what);
  MANTISSA_CUDNN_CHECK(api.cudnnCreateFilterDescriptor(&d.w), what);
  MANTISSA_CUDNN_CHECK(api.cudnnCreateConvolutionDescriptor(&d.conv), what);
  set_nchw(d.x, type, i(g.n), i(g.ic), i(g.ih), i(g.iw), what);
  set_nchw(d.y, type, i(g.n), i(g.oc), i(g.oh), i(g.ow), what);
  MANTISSA_CUDNN_CHECK(api.cudnnSetFilter4dDescriptor(d.w, type, CUDNN_TENSOR_NCHW, i(g.oc),
                                                      i(g.ic / g.groups), i(g.kh), i(g.kw)),
                       what);
  MANTISSA_CUDNN_CHECK(
      api.cudnnSetConvolution2dDescriptor(d.conv, i(g.ph), i(g.pw), i(g.sh), i(g.sw), i(g.dh),
                                          i(g.dw), CUDNN_CROSS_CORRELATION, compute_type_of(dt)),
      what);
  MANTISSA_CUDNN_CHECK(api.cudnnSetConvolutionGroupCount(d.conv, i(g.groups)), what);
  MANTISSA_CUDNN_CHECK(api.cudnnSetConvolutionMathType(d.conv, math), what);
}

// One cuDNN handle per device, made at first use and kept for the process (never destroyed:
// the driver may be gone at static destruction), as the cuBLAS handles are.
struct DeviceHandle {
  cudnnHandle_t handle = nullptr;
  std::mutex mu;  // bound to a stream per call; one call at a time
};

// The device must be current (the caller holds a DeviceGuard).
DeviceHandle& handle_for(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<DeviceHandle>> all;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DeviceHandle>& h = all[device];
  if (!h) {
    auto made = std::make_unique<DeviceHandle>();
    MANTISSA_CUDNN_CHECK(cudnn_api().cudnnCreate(&made->handle),
                         fmt::format("creating the cuDNN handle of cuda:{}", device));
    h = std::move(made);
  }
  return *h;
}

// The algorithm of one (device, direction, dtype, math, shape), its math type and workspace.
struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

using ChoiceKey = std::tuple<int, int, int, int, std::vector<int64_t>>;

std::mutex g_choice_mu;
std::map<ChoiceKey, Choice>& choices() {
  static std::map<ChoiceKey, Choice> all;
  return all;
}

ChoiceKey key_of(int device, Direction d, DType dt, cudnnMathType_t math, const ConvGeometry& g) {
  return {device,
          static_cast<int>(d),
          static_cast<int>(dt.id()),
          static_cast<int>(math),
          {g.n, g.ic, g.ih, g.iw, g.oc, g.kh, g.kw, g.oh, g.ow, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw,
           g.groups}};
}

// Workspaces above this are taken only when no algorithm needs less.
constexpr size_t kPreferredWorkspaceLimit = size_t{1} << 30;

// Orders the heuristic's results (already ranked by expected speed) for trying: successful
// ones only; under full fp32 none that uses tensor cores (TF32); deterministic ones and modest
// workspaces first, so runs repeat bit for bit where cuDNN can.
template <typename Perf>
std::vector<Perf> candidates(const Perf* perf, int count, DType dt, bool allow_tf32) {
  std::vector<Perf> out;
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (full_fp32(dt, allow_tf32) && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                                        p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        continue;
      const bool det = p.determinism == CUDNN_DETERMINISTIC;
      const bool small = p.memory <= kPreferredWorkspaceLimit;
      const int rank = det && small ? 0 : (small ? 1 : 2);
      if (rank == pass) out.push_back(p);
    }
  }
  return out;
}

// The first candidate whose workspace size cuDNN reports for the math type it will run with.
template <typename Perf, typename WorkspaceQuery>
Choice pick(const std::vector<Perf>& cands, Descriptors& d, DType dt, bool allow_tf32,
            WorkspaceQuery&& workspace_of, const What& what) {
  for (const Perf& p : cands) {
    // Full fp32 keeps FMA whatever the heuristic labelled the algorithm with; otherwise the
    // algorithm's own math type (cuDNN picks kernels by algorithm and math type together).
    const cudnnMathType_t math = full_fp32(dt, allow_tf32) ? CUDNN_FMA_MATH : p.mathType;
    if (cudnn_api().cudnnSetConvolutionMathType(d.conv, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    return Choice{static_cast<int>(p.algo), math, bytes};
  }
  fail("conv2d", "cuDNN offers no algorithm for {}{}", what.str(),
       full_fp32(dt, allow_tf32) ? " in full fp32 (float32_matmul_precision \"highest\")" : "");
}

// The scaling factors cuDNN reads: double for float64, float otherwise.
struct Scales {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  const void* one(DType dt) const { return dt == kFloat64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType dt) const { return dt == kFloat64 ? static_cast<const void*>(&d0) : &f0; }
};

void check_operand(const Tensor& t, DType dt, const Device& device, const char* name) {
  MANTISSA_CHECK(t.is_cuda() && t.device() == device && t.dtype() == dt, "conv2d",
                 "internal: the GPU convolution's {} is {} on {}, expected {} on {}", name,
                 t.dtype().name(), t.device().str(), dt.name(), device.str());
}

// Runs one direction: a (x for the forward and the weight gradient, gy for the input
// gradient) and b (w, w, gy) in, a new contiguous tensor of out_shape out.
Tensor run(Direction dir, const ConvGeometry& g, const Tensor& a_in, const Tensor& b_in,
           const Shape& out_shape, bool allow_tf32) {
  const DType dt = a_in.dtype();
  const Device device = a_in.device();
  check_operand(b_in, dt, device, "operands");
  mantissa::cuda::detail::DeviceGuard guard(device);
  const What what{dir, g, dt};
  if (dt == kBFloat16) {
    MANTISSA_CHECK(mantissa::cuda::is_bf16_supported(device.index), "conv2d",
                   "bfloat16 needs a GPU of compute capability 8.0 or later; {} is older ({})",
                   device.str(), what.str());
  }
  // An empty batch: an empty output, or a zero weight gradient.
  if (numel_of(out_shape) == 0 || a_in.numel() == 0 || b_in.numel() == 0)
    return zeros(out_shape, dt, device);
  const Tensor a = a_in.detach().contiguous(), b = b_in.detach().contiguous();
  Tensor out = empty(out_shape, dt, device);
  const cudnnMathType_t math0 = math_type_of(dt, allow_tf32);
  Descriptors d;
  make_descriptors(d, g, dt, math0, what);
  const kernels::cuda::CudnnApi& api = cudnn_api();
  DeviceHandle& h = handle_for(device.index);
  std::lock_guard<std::mutex> lock(h.mu);
  MANTISSA_CUDNN_CHECK(api.cudnnSetStream(h.handle, current_stream()), what);

  const ChoiceKey key = key_of(device.index, dir, dt, math0, g);
  Choice choice;
  bool known = false;
  {
    std::lock_guard<std::mutex> cl(g_choice_mu);
    auto it = choices().find(key);
    if (it != choices().end()) {
      choice = it->second;
      known = true;
    }
  }
  if (!known) {
    // The descriptors must describe conv2d's own output (checked once per shape).
    int on = 0, oc = 0, oh = 0, ow = 0;
    MANTISSA_CUDNN_CHECK(
        api.cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow), what);
    MANTISSA_CHECK(on == g.n && oc == g.oc && oh == g.oh && ow == g.ow, "conv2d",
                   "internal: cuDNN computes output [{}, {}, {}, {}] for {}", on, oc, oh, ow,
                   what.str());
    switch (dir) {
      case Direction::kForward: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int count = 0;
        MANTISSA_CUDNN_CHECK(
            api.cudnnGetConvolutionForwardAlgorithm_v7(
                h.handle, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
            what);
        choice = pick(
            candidates(perf, count, dt, allow_tf32), d, dt, allow_tf32,
            [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
              return api.cudnnGetConvolutionForwardWorkspaceSize(h.handle, d.x, d.w, d.conv, d.y,
                                                                 algo, bytes);
            },
            what);
        break;
      }
      case Direction::kBackwardData: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int count = 0;
        MANTISSA_CUDNN_CHECK(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                 h.handle, d.w, d.y, d.conv, d.x,
                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf),
                             what);
        choice = pick(
            candidates(perf, count, dt, allow_tf32), d, dt, allow_tf32,
            [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
              return api.cudnnGetConvolutionBackwardDataWorkspaceSize(h.handle, d.w, d.y, d.conv,
                                                                      d.x, algo, bytes);
            },
            what);
        break;
      }
      case Direction::kBackwardWeight: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        MANTISSA_CUDNN_CHECK(api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                 h.handle, d.x, d.y, d.conv, d.w,
                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
                             what);
        choice = pick(
            candidates(perf, count, dt, allow_tf32), d, dt, allow_tf32,
            [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
              return api.cudnnGetConvolutionBackwardFilterWorkspaceSize(h.handle, d.x, d.y, d.conv,
                                                                        d.w, algo, bytes);
            },
            what);
        break;
      }
    }
    std::lock_guard<std::mutex> cl(g_choice_mu);
    choices()[key] = choice;
  }
  MANTISSA_CUDNN_CHECK(api.cudnnSetConvolutionMathType(d.conv, choice.math), what);

  // The workspace is a tensor of the caching allocator: released when this returns, its block
  // is reused only by work queued later on the same stream, after this convolution.
  Tensor workspace;
  if (choice.workspace > 0)
    workspace = empty({static_cast<int64_t>(choice.workspace)}, kUInt8, device);
  void* ws = choice.workspace > 0 ? workspace.device_ptr() : nullptr;
  const Scales s;
  switch (dir) {
    case Direction::kForward:
      MANTISSA_CUDNN_CHECK(
          api.cudnnConvolutionForward(h.handle, s.one(dt), d.x, a.device_ptr(), d.w, b.device_ptr(),
                                      d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo),
                                      ws, choice.workspace, s.zero(dt), d.y, out.device_ptr()),
          what);
      break;
    case Direction::kBackwardData:
      MANTISSA_CUDNN_CHECK(api.cudnnConvolutionBackwardData(
                               h.handle, s.one(dt), d.w, b.device_ptr(), d.y, a.device_ptr(),
                               d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), ws,
                               choice.workspace, s.zero(dt), d.x, out.device_ptr()),
                           what);
      break;
    case Direction::kBackwardWeight:
      MANTISSA_CUDNN_CHECK(api.cudnnConvolutionBackwardFilter(
                               h.handle, s.one(dt), d.x, a.device_ptr(), d.y, b.device_ptr(),
                               d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
                               ws, choice.workspace, s.zero(dt), d.w, out.device_ptr()),
                           what);
      break;
  }
  return out;
}

}  // namespace

namespace gpu {

Tensor conv2d_forward(const ConvGeometry& g, const Tensor& x, const Tensor& w, bool allow_tf32) {
  return run(Direction::kForward, g, x, w, {g.n, g.oc, g.oh, g.ow}, allow_tf32);
}

Tensor conv2d_backward_data(const ConvGeometry& g, const Tensor& gy, const Tensor& w,
                            bool allow_tf32) {
  return run(Direction::kBackwardData, g, gy, w, {g.n, g.ic, g.ih, g.iw}, allow_tf32);
}

Tensor conv2d_backward_weight(const ConvGeometry& g, const Tensor& x, const Tensor& gy,
                              bool allow_tf32) {
  return run(Direction::kBackwardWeight, g, x, gy, {g.oc, g.ic / g.groups, g.kh, g.kw}, allow_tf32);
}

}  // namespace gpu

namespace cuda {

std::array<int64_t, 4> cudnn_output_dims(const ConvGeometry& g, DType dt) {
  const What what{Direction::kForward, g, dt};
  Descriptors d;
  make_descriptors(d, g, dt, math_type_of(dt, false), what);
  int n = 0, c = 0, h = 0, w = 0;
  MANTISSA_CUDNN_CHECK(
      cudnn_api().cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w), what);
  return {n, c, h, w};
}

}  // namespace cuda
}  // namespace mantissa::kernels

#else
namespace mantissa::kernels::cuda {
std::array<int64_t, 4> cudnn_output_dims(const ConvGeometry&, DType) {
  fail("conv2d", "built without the CUDA backend: no cuDNN");
}
}  // namespace mantissa::kernels::cuda
#endif
