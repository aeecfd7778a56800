#pragma once
// CUDA graphs, as torch.cuda.CUDAGraph: the kernels a piece of code queues on a GPU are recorded
// once (captured) and then launched again as one unit (replayed), so a step of a small model no
// longer pays the host's cost of launching each of its hundreds of kernels. A replay runs the
// same kernels on the same memory with the same arguments: inputs go into tensors made before
// the capture (copy_ into them before each replay), and outputs are tensors made during it,
// overwritten by every replay. Tensors made during a capture come from the graph's private
// memory pool, which no other work uses while the graph lives.
//
// What a capture cannot hold is refused with a clear error while capturing: a copy between host
// and GPU, a synchronisation (item(), cuda::synchronize), dropout (its random numbers would be
// the same in every replay). train::GraphedStep (mantissa/train/graphed_step.h) captures a
// training step's forward and backward with these rules. Present in every build: without the
// CUDA backend or a GPU, capturing throws and is_current_stream_capturing() is false.
// docs/cuda.md, "CUDA graphs".
#include <cstdint>
#include <functional>
#include <memory>

#include "mantissa/core/device.h"

namespace mantissa::cuda {

// True while the current GPU's stream is being captured into a graph.
bool is_current_stream_capturing();

class CUDAGraph {
 public:
  CUDAGraph();
  ~CUDAGraph();  // waits for a replay in flight, then frees the graph and returns its pool
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  // Starts recording the kernels queued on `device` (they are not run); allocations there come
  // from this graph's pool until capture_end. Throws when the graph already holds a capture.
  void capture_begin(Device device = cuda_device(0));
  // Ends the recording and prepares the graph for replay. Throws, leaving the graph empty, when
  // something during the capture broke it (the error says what).
  void capture_end();
  // capture_begin, body, capture_end; when body throws, the capture is abandoned (the stream
  // leaves capture mode, the graph stays empty) and the exception goes on.
  void capture(const std::function<void()>& body, Device device = cuda_device(0));
  // Queues the recorded kernels again (asynchronous, on the device's stream).
  void replay();
  // Frees the graph; its pool's blocks go back to the shared cache as their tensors are freed.
  void reset();

  bool is_captured() const;
  Device device() const;
  // The kernels, copies and fills the capture recorded (0 when empty).
  int64_t num_nodes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  void abandon_capture();
};

}  // namespace mantissa::cuda
