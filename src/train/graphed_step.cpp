// A training step's forward and backward captured once into a CUDA graph and replayed
// (mantissa/train/graphed_step.h).
#include "mantissa/train/graphed_step.h"

#include <exception>
#include <utility>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/optim/grad_scaler.h"

namespace mantissa::train {
namespace {
constexpr const char* kWhere = "GraphedStep";

double scale_of(const amp::GradScaler* scaler) {
  return scaler != nullptr && scaler->is_enabled() ? scaler->get_scale() : 1.0;
}
}  // namespace

GraphedStep::GraphedStep(std::vector<Tensor> params, LossFn loss_fn, GraphedStepOptions options)
    : params_(std::move(params)), loss_fn_(std::move(loss_fn)), options_(options) {
  MANTISSA_CHECK(loss_fn_ != nullptr, kWhere, "the loss function is empty");
  MANTISSA_CHECK(options_.warmup_steps >= 1, kWhere,
                 "warmup_steps must be >= 1 (lazy set-ups such as cuBLAS handles must happen "
                 "before the capture), got {}",
                 options_.warmup_steps);
  MANTISSA_CHECK(!params_.empty(), kWhere, "no parameters: give the tensors the step trains");
  const Device device = params_[0].device();
  for (size_t i = 0; i < params_.size(); ++i) {
    MANTISSA_CHECK(params_[i].defined(), kWhere, "parameter {} is an undefined tensor", i);
    MANTISSA_CHECK(params_[i].device().is_cuda() && params_[i].device() == device, kWhere,
                   "parameter {} is on {} (parameter 0 on {}): a CUDA graph needs every "
                   "parameter on one GPU; move the model there first (module.to(cuda_device(0)))",
                   i, params_[i].device().str(), device.str());
  }
  MANTISSA_CHECK(cuda::is_available(), kWhere, "CUDA graphs need a GPU, but {}",
                 cuda::unavailable_reason());
}

GraphedStep::~GraphedStep() = default;

bool GraphedStep::matches_static_inputs(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].shape() != static_inputs_[i].shape() ||
        inputs[i].dtype() != static_inputs_[i].dtype())
      return false;
  }
  return true;
}

Tensor GraphedStep::run(const std::vector<Tensor>& inputs, amp::GradScaler* scaler) {
  const Device device = params_[0].device();
  for (size_t i = 0; i < inputs.size(); ++i) {
    MANTISSA_CHECK(inputs[i].defined(), kWhere, "input {} is an undefined tensor", i);
    MANTISSA_CHECK(inputs[i].device() == device, kWhere,
                   "input {} is on {}; copy the batch to {} first (a graph replays GPU work "
                   "only, so the step cannot copy it for you inside)",
                   i, inputs[i].device().str(), device.str());
  }
  if (graph_ == nullptr && fallback_reason_.empty() && eager_steps_ >= options_.warmup_steps)
    capture(inputs, scaler);
  if (graph_ != nullptr && matches_static_inputs(inputs)) return replay(inputs, scaler);
  return run_eagerly(inputs, scaler);
}

Tensor GraphedStep::run_eagerly(const std::vector<Tensor>& inputs, amp::GradScaler* scaler) {
  for (const Tensor& p : params_) p.reset_grad();  // this batch's gradient, not a sum
  const Tensor loss = loss_fn_(inputs);
  MANTISSA_CHECK(loss.defined() && loss.numel() == 1, kWhere,
                 "the loss function must return a scalar loss, got {}",
                 loss.defined() ? shape_str(loss.shape()) : "an undefined tensor");
  const Tensor to_backward = scaler != nullptr && scaler->is_enabled() ? scaler->scale(loss) : loss;
  to_backward.backward();
  ++eager_steps_;
  return loss.detach();
}

void GraphedStep::capture(const std::vector<Tensor>& inputs, amp::GradScaler* scaler) {
  const Device device = params_[0].device();
  {
    // Made before the capture, outside the graph's pool: the tensors each replay reads.
    NoGradGuard no_grad;
    for (const Tensor& in : inputs) {
      Tensor s = empty(in.shape(), in.dtype(), device);
      s.copy_(in);
      static_inputs_.push_back(s);
    }
    last_scale_ = scale_of(scaler);
    static_scale_ = full({}, last_scale_, kFloat32, device);
  }
  for (const Tensor& p : params_) p.reset_grad();  // the backward then writes fresh gradients
  auto graph = std::make_unique<cuda::CUDAGraph>();
  try {
    Tensor loss;
    graph->capture(
        [&] {
          loss = loss_fn_(static_inputs_);
          MANTISSA_CHECK(loss.defined() && loss.numel() == 1, kWhere,
                         "the loss function must return a scalar loss, got {}",
                         loss.defined() ? shape_str(loss.shape()) : "an undefined tensor");
          // As GradScaler::scale multiplies (by 1 without a scaler: exact).
          mul(loss, static_scale_).backward();
        },
        device);
    static_loss_ = loss.detach();
    for (const Tensor& p : params_) {
      captured_grads_.push_back(p.grad());
      param_data_.push_back(p.device_ptr());
    }
    graph_ = std::move(graph);
  } catch (const std::exception& e) {
    static_inputs_.clear();
    static_scale_ = Tensor();
    static_loss_ = Tensor();
    captured_grads_.clear();
    param_data_.clear();
    for (const Tensor& p : params_) p.reset_grad();
    fallback_reason_ = e.what();
    warn_once(fmt::format(
        "[GraphedStep] the step could not be captured in a CUDA graph, so every step runs "
        "eagerly: {}",
        fallback_reason_));
  }
}

Tensor GraphedStep::replay(const std::vector<Tensor>& inputs, amp::GradScaler* scaler) {
  for (size_t i = 0; i < params_.size(); ++i) {
    MANTISSA_CHECK(params_[i].device_ptr() == param_data_[i], kWhere,
                   "parameter {} was moved or replaced since the capture (the graph reads its "
                   "old memory); make a new GraphedStep after changing the parameters",
                   i);
  }
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].device_ptr() != static_inputs_[i].device_ptr())
        static_inputs_[i].copy_(inputs[i]);
    }
    const double scale = scale_of(scaler);
    if (scale != last_scale_) {
      static_scale_.fill_(scale);
      last_scale_ = scale;
    }
  }
  graph_->replay();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (captured_grads_[i].defined()) {
      params_[i].set_grad(captured_grads_[i]);
    } else {
      params_[i].reset_grad();
    }
  }
  ++replays_;
  return static_loss_.clone();  // the next replay overwrites static_loss_
}

}  // namespace mantissa::train
