#include "mantissa/train/precision.h"

#include <cmath>

#include "mantissa/optim/grad_scaler.h"

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/nn/clip_grad.h"

namespace mantissa::train {
namespace {

class DtypeScope : public PrecisionScope {
 public:
  explicit DtypeScope(DType dtype) : guard_(dtype) {}

 private:
  DefaultDtypeGuard guard_;
};

}  // namespace

void check_precision_options(const PrecisionOptions& options,
                             std::initializer_list<const char*> known) {
  for (const auto& [key, value] : options.extra) {
    bool ok = false;
    std::string known_list;
    for (const char* k : known) {
      ok = ok || key == k;
      known_list += (known_list.empty() ? "" : ", ") + std::string(k);
    }
    MANTISSA_CHECK(
        ok, "precision", "precision '{}' has no option '{}'; {}", options.precision, key,
        known_list.empty() ? std::string("it takes none") : "its options are: " + known_list);
  }
}

std::optional<Precision::LossScaleState> Precision::loss_scale_state() {
  amp::GradScaler* s = scaler();
  if (s == nullptr) return std::nullopt;
  return LossScaleState{s->get_scale(), s->skipped_steps()};
}

std::unique_ptr<Precision> make_true_precision(const PrecisionOptions& options) {
  check_precision_options(options);
  return std::make_unique<Precision>();
}

GradClipAlgorithm grad_clip_algorithm_from_string(const std::string& name) {
  if (name == "norm") return GradClipAlgorithm::kNorm;
  if (name == "value") return GradClipAlgorithm::kValue;
  fail("Trainer", "gradient_clip_algorithm '{}' is invalid; allowed algorithms: 'value', 'norm'",
       name);
}

ScopePtr default_dtype_scope(DType dtype) { return std::make_unique<DtypeScope>(dtype); }

bool Precision::optimizer_step(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                               const std::function<void()>& after_closure) {
  // As torch's optimizer.step(closure): the closure runs first, then the update. A skipped
  // training_step left no gradients (zero_grad frees them), so the update changes nothing.
  grads_known_finite_ = false;
  const Tensor loss = closure();
  after_closure();  // clip_gradients may learn that every gradient is finite
  if (!loss.defined()) return false;
  if (grads_known_finite_)
    optimizer.step_with_finite_grads();
  else
    optimizer.step();
  grads_known_finite_ = false;
  return true;
}

void Precision::clip_gradients(optim::Optimizer& optimizer, double clip_val,
                               GradClipAlgorithm algorithm) {
  if (clip_val <= 0) return;
  if (algorithm == GradClipAlgorithm::kValue) {
    nn::utils::clip_grad_value_(optimizer.parameters(), clip_val);
  } else {
    const Tensor total = nn::utils::clip_grad_norm_(optimizer.parameters(), clip_val, 2.0,
                                                    /*error_if_nonfinite=*/false);
    // Read on the CPU only: a GPU norm would cost a synchronisation per step.
    grads_known_finite_ = total.defined() && !total.is_cuda() && std::isfinite(total.item());
  }
}

}  // namespace mantissa::train
