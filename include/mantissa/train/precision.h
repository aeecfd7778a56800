#pragma once
// Precision plugins (Lightning's precision plugins, docs/trainer.md): one object owns how a
// training run treats dtypes: how the model is converted and initialised, what scope the
// forward runs in, how the batch is cast, how backward and the optimizer step run (loss
// scaling) and how gradients are clipped. This base class is "32-true": every hook does the
// default thing. DoublePrecision, MixedPrecision and HalfPrecision override what they change.
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/core/dtype.h"
#include "mantissa/core/tensor.h"
#include "mantissa/data/dataset.h"
#include "mantissa/nn/module.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::amp {
class GradScaler;
}

namespace mantissa::train {

// What a plugin factory gets (see precision_registry.h). Common fields plus plugin-specific
// settings by name, e.g. extra["fp8_recipe"] = "delayed", extra["bnb_dtype"] = "bfloat16",
// extra["ignore_modules"] = "head,lm_head". A plugin reads the keys it knows and rejects the
// rest (check_precision_options).
struct PrecisionOptions {
  std::string precision;            // the canonical name (make_precision fills it in)
  std::string accelerator = "cpu";  // "cpu" or "gpu" once make_precision resolved it
  std::map<std::string, std::string> extra;
};

// Throws when options.extra has a key outside `known`, naming it and the known keys.
void check_precision_options(const PrecisionOptions& options,
                             std::initializer_list<const char*> known = {});

enum class GradClipAlgorithm { kNorm, kValue };
// "norm" or "value"; anything else throws listing both.
GradClipAlgorithm grad_clip_algorithm_from_string(const std::string& name);

// A scope a plugin opens (default dtype, autocast); destroying it restores the previous state.
class PrecisionScope {
 public:
  virtual ~PrecisionScope() = default;
};
using ScopePtr = std::unique_ptr<PrecisionScope>;

class Precision {
 public:
  Precision() = default;
  virtual ~Precision() = default;
  Precision(const Precision&) = delete;
  Precision& operator=(const Precision&) = delete;

  // The canonical precision name ("32-true", "bf16-mixed", ...).
  virtual std::string precision() const { return "32-true"; }
  // The class name, the key of the plugin's state in a checkpoint ("MixedPrecision").
  virtual std::string class_name() const { return "Precision"; }
  // The dtype parameters live in.
  virtual DType param_dtype() const { return kFloat32; }

  // Converts an already built module (HalfPrecision: module.to(dtype)).
  virtual void convert_module(nn::Module& /*module*/) {}
  // Scopes in which new parameters get the plugin's dtype (Trainer::init_module,
  // configure_model).
  virtual ScopePtr tensor_init_context() { return nullptr; }
  virtual ScopePtr module_init_context() { return tensor_init_context(); }
  // The scope of every training/validation/test step (autocast for the mixed precisions).
  virtual ScopePtr forward_context() { return nullptr; }
  // Casts a batch before the step (floating inputs to the half dtype for HalfPrecision).
  virtual data::Example convert_input(const data::Example& batch) const { return batch; }
  // Casts what the model's forward returned (Lightning's Precision.convert_output), applied by
  // TrainModule::precision_forward: float32 for Apex O2/O3, whose amp.initialize patches the
  // model's forward to return float32. The other plugins leave outputs as they are.
  virtual Tensor convert_output(const Tensor& output) const { return output; }

  // After the fit's first training_step, before its backward: the plugin's check that what it
  // set up is in use (transformer-engine: every FP8 layer ran; a forward that calls the layers
  // it replaced through member pointers kept from the constructor runs without FP8).
  virtual void check_first_training_step() const {}

  // The tensor to differentiate (the scaled loss under fp16 loss scaling).
  virtual Tensor pre_backward(const Tensor& loss) { return loss; }
  virtual void backward(const Tensor& tensor) { tensor.backward(); }

  // One optimizer step of automatic optimisation. `closure` runs training_step, zero_grad
  // and backward and returns the (unscaled) loss, undefined when training_step skipped the
  // step; `after_closure` runs the on_before_optimizer_step hooks and gradient clipping.
  // Returns whether optimizer.step() ran.
  virtual bool optimizer_step(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                              const std::function<void()>& after_closure);

  // clip_val <= 0: nothing. kValue: clamp every gradient; kNorm: scale them to a 2-norm of at
  // most clip_val (a non-finite norm is not an error, so a loss scaler can skip the step).
  virtual void clip_gradients(optim::Optimizer& optimizer, double clip_val,
                              GradClipAlgorithm algorithm);

  // The plugin's checkpoint state ({} when it has none: every built-in plugin but 16-mixed).
  // Checkpoints store it for every plugin under class_name() and hand it back to
  // load_state_dict on resume, so whatever a plugin must carry across a resume (loss scale,
  // FP8 amax history) belongs here.
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  // Restores state_dict()'s output; throws mantissa::Error when it does not fit.
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}

  // The loss scaler, or nullptr (every plugin but 16-mixed).
  virtual amp::GradScaler* scaler() { return nullptr; }

  // The current dynamic loss scale and the optimizer steps it skipped, for reports: the
  // GradScaler's (16-mixed), or what a plugin that scales by itself keeps (Apex O2/O3);
  // nullopt when the plugin does not scale dynamically.
  struct LossScaleState {
    double scale = 1.0;
    int64_t skipped_steps = 0;
  };
  virtual std::optional<LossScaleState> loss_scale_state();

 protected:
  // Set by clip_gradients when it computed a finite 2-norm over the optimizer's gradients this
  // step (a NaN or inf anywhere makes the norm NaN or inf): optimizer_step then calls
  // Optimizer::step_with_finite_grads, which lets the 8-bit optimizers skip their own scan of
  // every gradient (about a tenth of their step). Cleared at each optimizer_step.
  bool grads_known_finite_ = false;
};

// "32-true" (this base class); options.extra must be empty.
std::unique_ptr<Precision> make_true_precision(const PrecisionOptions& options);

// A scope that sets the default dtype (for DoublePrecision and HalfPrecision).
ScopePtr default_dtype_scope(DType dtype);

}  // namespace mantissa::train
