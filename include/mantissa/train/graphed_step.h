#pragma once
// A training step's forward and backward as one CUDA graph (mantissa/core/cuda_graph.h), the C++
// counterpart of capturing a step with torch.cuda.graph: after a few eager warm-up steps the
// loss function and the backward of its (scaled) loss are captured once, and every later step
// copies its batch into the graph's input tensors and replays it, launching hundreds of kernels
// as one. The optimizer step (and a GradScaler's unscale and inf check) stays outside, eager, so
// the learning rate, the step count and the scaler's decisions change freely between replays.
//
//   train::GraphedStep step(model.parameters(), [&](const std::vector<Tensor>& in) {
//     return models::GPT::loss(model.forward(in[0]), in[1]);
//   });
//   for (...) {
//     Tensor loss;
//     { amp::autocast ac(DeviceType::kCUDA, kFloat16); loss = step.run({x, y}, &scaler); }
//     scaler.step(opt); scaler.update();      // or opt.step() without a scaler
//   }
//
// After run() every parameter's grad holds this batch's gradient (of the loss times the scale
// when a scaler is given), replacing what it held. The rules of a graph apply to the loss
// function: no dropout, no host reads of GPU values, the same shapes every step; a batch of
// other shapes (the last, smaller one) runs eagerly. When the capture fails, the reason is
// warned once and every step runs eagerly (fallback_reason()). docs/cuda.md, "CUDA graphs".
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/cuda_graph.h"
#include "mantissa/core/tensor.h"

namespace mantissa::amp {
class GradScaler;
}

namespace mantissa::train {

struct GraphedStepOptions {
  // Eager steps before the capture: they make what is made lazily at first use (cuBLAS
  // handles and workspaces, cached tensors) outside the graph. At least 1.
  int warmup_steps = 3;
};

class GraphedStep {
 public:
  using LossFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;
  // params: every tensor whose gradient the step fills (an optimizer's parameters), on one GPU.
  GraphedStep(std::vector<Tensor> params, LossFn loss_fn, GraphedStepOptions options = {});
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One forward and backward on `inputs` (tensors on the parameters' GPU). The scaler, when
  // given and enabled, scales the loss before the backward as scaler.scale(loss) would.
  // Returns the loss (unscaled, detached), a tensor of its own that later steps leave alone.
  Tensor run(const std::vector<Tensor>& inputs, amp::GradScaler* scaler = nullptr);

  bool is_graphed() const { return graph_ != nullptr; }  // captured and replaying
  int64_t replays() const { return replays_; }
  // The captured graph's kernels, copies and fills (0 before the capture).
  int64_t graph_nodes() const { return graph_ ? graph_->num_nodes() : 0; }
  int64_t eager_steps() const { return eager_steps_; }
  // Why the capture failed (empty while it has not): the error raised inside the capture.
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  bool matches_static_inputs(const std::vector<Tensor>& inputs) const;
  void capture(const std::vector<Tensor>& inputs, amp::GradScaler* scaler);
  Tensor run_eagerly(const std::vector<Tensor>& inputs, amp::GradScaler* scaler);
  Tensor replay(const std::vector<Tensor>& inputs, amp::GradScaler* scaler);

  std::vector<Tensor> params_;
  LossFn loss_fn_;
  GraphedStepOptions options_;
  std::unique_ptr<cuda::CUDAGraph> graph_;
  std::vector<Tensor> static_inputs_;    // what each replay reads: copy_ targets
  Tensor static_scale_;                  // the loss scale each replay multiplies by (0-dim, fp32)
  double last_scale_ = 1.0;              // what static_scale_ holds
  Tensor static_loss_;                   // written by each replay
  std::vector<Tensor> captured_grads_;   // each parameter's gradient as the graph writes it
  std::vector<const void*> param_data_;  // where the graph reads each parameter
  int64_t replays_ = 0, eager_steps_ = 0;
  std::string fallback_reason_;
};

}  // namespace mantissa::train
