// CUDA graphs (mantissa/core/cuda_graph.h): stream capture of the device's one stream into a
// graph with a private memory pool (cuda_allocator.cpp), and its replay.
#include "mantissa/core/cuda_graph.h"

#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#endif

namespace mantissa::cuda {

#if MANTISSA_HAS_CUDA

namespace detail {

bool stream_is_capturing() {
  if (!is_available()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MANTISSA_CUDA_CHECK(cudaStreamIsCapturing(current_stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

void refuse_during_capture(const char* what) {
  MANTISSA_CHECK(!stream_is_capturing(), "CUDAGraph",
                 "{} cannot be captured in a CUDA graph: a replay would not repeat it (a graph "
                 "replays GPU work only). Do it before the capture or after a replay",
                 what);
}

}  // namespace detail

bool is_current_stream_capturing() { return detail::stream_is_capturing(); }

struct CUDAGraph::Impl {
  Device device = cuda_device(0);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<detail::GraphPool> pool;
  bool capturing = false;
};

CUDAGraph::CUDAGraph() : impl_(std::make_unique<Impl>()) {}

CUDAGraph::~CUDAGraph() {
  try {
    if (impl_->capturing) abandon_capture();
    reset();
  } catch (...) {  // a destructor must not throw; the driver reports the same error again later
  }
}

void CUDAGraph::capture_begin(Device device) {
  detail::require_device(device, "CUDAGraph::capture_begin");
  MANTISSA_CHECK(!impl_->capturing && impl_->exec == nullptr, "CUDAGraph",
                 "this graph already holds a capture; reset() it first");
  detail::DeviceGuard guard(device);
  const cudaStream_t stream = detail::current_stream();
  // Work queued before the capture must not be mistaken for the graph's: it runs first.
  MANTISSA_CUDA_CHECK(cudaStreamSynchronize(stream));
  impl_->device = device;
  impl_->pool = detail::begin_graph_pool(device.index);
  // Relaxed: the allocator may call cudaMalloc while capturing (a new block for the pool).
  const cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    detail::end_graph_pool(device.index);
    detail::retire_graph_pool(impl_->pool);
    impl_->pool.reset();
    MANTISSA_CUDA_CHECK(err);
  }
  impl_->capturing = true;
}

void CUDAGraph::capture_end() {
  MANTISSA_CHECK(impl_->capturing, "CUDAGraph", "capture_end() without capture_begin()");
  detail::DeviceGuard guard(impl_->device);
  impl_->capturing = false;
  detail::end_graph_pool(impl_->device.index);
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(detail::current_stream(), &graph);
  if (err != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    detail::retire_graph_pool(impl_->pool);
    impl_->pool.reset();
    throw Error(fmt::format(
        "[CUDAGraph] the capture on {} was broken by a call a graph cannot hold ({}); the first "
        "error raised inside the capture names it",
        impl_->device.str(), cudaGetErrorString(err)));
  }
  impl_->graph = graph;
  const cudaError_t inst = cudaGraphInstantiate(&impl_->exec, graph, 0);
  if (inst != cudaSuccess) {
    (void)cudaGetLastError();
    impl_->exec = nullptr;
    reset();
    throw Error(fmt::format("[CUDAGraph] the captured graph could not be instantiated: {}",
                            cudaGetErrorString(inst)));
  }
}

void CUDAGraph::abandon_capture() {
  detail::DeviceGuard guard(impl_->device);
  impl_->capturing = false;
  detail::end_graph_pool(impl_->device.index);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(detail::current_stream(), &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the error that broke the capture is not sticky
  detail::retire_graph_pool(impl_->pool);
  impl_->pool.reset();
}

void CUDAGraph::capture(const std::function<void()>& body, Device device) {
  capture_begin(device);
  try {
    body();
  } catch (...) {
    abandon_capture();
    throw;
  }
  capture_end();
}

void CUDAGraph::replay() {
  MANTISSA_CHECK(impl_->exec != nullptr, "CUDAGraph",
                 "replay() of a graph that holds no capture (capture it first)");
  detail::DeviceGuard guard(impl_->device);
  MANTISSA_CUDA_CHECK(cudaGraphLaunch(impl_->exec, detail::current_stream()));
}

void CUDAGraph::reset() {
  MANTISSA_CHECK(!impl_->capturing, "CUDAGraph", "reset() during a capture");
  if (impl_->graph == nullptr && impl_->exec == nullptr && impl_->pool == nullptr) return;
  detail::DeviceGuard guard(impl_->device);
  // A replay may still be running: its blocks go back to the shared cache only after it.
  MANTISSA_CUDA_CHECK(cudaStreamSynchronize(detail::current_stream()));
  if (impl_->exec != nullptr) (void)cudaGraphExecDestroy(impl_->exec);
  if (impl_->graph != nullptr) (void)cudaGraphDestroy(impl_->graph);
  impl_->exec = nullptr;
  impl_->graph = nullptr;
  detail::retire_graph_pool(impl_->pool);
  impl_->pool.reset();
}

bool CUDAGraph::is_captured() const { return impl_->exec != nullptr; }
Device CUDAGraph::device() const { return impl_->device; }
int64_t CUDAGraph::num_nodes() const {
  if (impl_->graph == nullptr) return 0;
  size_t count = 0;
  MANTISSA_CUDA_CHECK(cudaGraphGetNodes(impl_->graph, nullptr, &count));
  return static_cast<int64_t>(count);
}

#else  // built without the CUDA backend

bool is_current_stream_capturing() { return false; }

struct CUDAGraph::Impl {};
CUDAGraph::CUDAGraph() : impl_(std::make_unique<Impl>()) {}
CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin(Device) {
  throw Error("[CUDAGraph] capture_begin: " + unavailable_reason());
}
void CUDAGraph::capture_end() { throw Error("[CUDAGraph] capture_end() without capture_begin()"); }
void CUDAGraph::capture(const std::function<void()>&, Device device) { capture_begin(device); }
void CUDAGraph::replay() {
  throw Error("[CUDAGraph] replay() of a graph that holds no capture (capture it first)");
}
void CUDAGraph::reset() {}
void CUDAGraph::abandon_capture() {}
bool CUDAGraph::is_captured() const { return false; }
Device CUDAGraph::device() const { return cuda_device(0); }
int64_t CUDAGraph::num_nodes() const { return 0; }

#endif

}  // namespace mantissa::cuda
