#include "mantissa/fp8/linear.h"

#include <algorithm>

#include "core/inplace.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/state_check.h"

namespace mantissa::fp8 {

Fp8Module::Fp8Module(std::string name, int64_t amax_history_len)
    : Module(std::move(name)), state_(std::make_shared<ScalingState>(kNumRoles, amax_history_len)) {
  // Host code updates the scales between steps (delayed scaling): on a GPU too they stay here.
  register_host_buffer(kScaleBufferName, state_->scale);
  register_host_buffer(kAmaxHistoryBufferName, state_->amax_history);
}

void Fp8Module::set_amax_history_len(int64_t len) {
  MANTISSA_CHECK(len >= 1, "fp8 recipe",
                 "amax_history_len must be at least 1 (the current step's slot), got {}", len);
  Tensor& h = state_->amax_history;
  if (h.size(0) == len) return;
  Tensor resized = zeros({len, h.size(1)}, kFloat32);
  const int64_t keep = std::min(len, h.size(0));
  mantissa::detail::copy_unchecked(resized.narrow(0, 0, keep), h.narrow(0, 0, keep));
  // Swap the storage under the registered handle so the buffer keeps its identity.
  h.impl() = resized.impl();
}

void Fp8Module::prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) {
  nn::StateDict own;
  for (const char* buffer : {kScaleBufferName, kAmaxHistoryBufferName}) {
    if (state.contains(prefix + buffer)) own.insert(prefix + buffer, state.at(prefix + buffer));
  }
  check_state_tensors(own);
}

void Fp8Module::follow_active_recipe() {
  if (!fp8_enabled()) return;
  set_amax_history_len(fp8_recipe().history_rows());
  ++fp8_forwards_;
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias,
               std::optional<DType> dtype, int64_t amax_history_len)
    : Fp8Module("Fp8Linear", amax_history_len) {
  nn::Linear init(in_features, out_features, with_bias, dtype);
  weight = register_parameter("weight", init.weight.detach());
  if (with_bias) bias = register_parameter("bias", init.bias.detach());
}

Linear::Linear(Tensor w, Tensor b, int64_t amax_history_len)
    : Fp8Module("Fp8Linear", amax_history_len) {
  weight = register_parameter("weight", std::move(w), true);
  if (b.defined()) bias = register_parameter("bias", std::move(b), true);
}

std::shared_ptr<Linear> Linear::from_linear(const nn::Linear& linear, int64_t amax_history_len) {
  auto m = std::shared_ptr<Linear>(new Linear(linear.weight, linear.bias, amax_history_len));
  m->weight.requires_grad_(linear.weight.requires_grad());
  if (m->bias.defined()) m->bias.requires_grad_(linear.bias.requires_grad());
  m->train(linear.is_training());
  return m;
}

Tensor Linear::forward(const Tensor& input) {
  follow_active_recipe();
  return fp8_linear(input, weight, bias, fp8_state(), &cache_);
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features(), out_features(),
                     bias.defined());
}

}  // namespace mantissa::fp8
