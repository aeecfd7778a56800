#pragma once
// fp8::Linear: TransformerEngine's te.Linear on the CPU (docs/fp8.md "The FP8 Linear"). Same
// parameters as nn::Linear ("weight" (out, in), "bias" (out)); under an enabled Fp8Autocast its
// forward and both backward GEMMs take FP8 operands, each of input, weight and grad_output
// with its own scale and amax history, saved in the state dict as the buffers "fp8_scale"
// [3] and "fp8_amax_history" [amax_history_len, 3] (float32, kept when the module changes
// dtype) so a resumed run continues bit for bit. Outside the scope it is a plain Linear.
#include <memory>
#include <optional>

#include "mantissa/fp8/functional.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"

namespace mantissa::fp8 {

// The names of the FP8 state buffers in an FP8 layer's state dict ("h1.attn.in_proj.fp8_scale",
// ...): scaling state, not weights, which a plain model does not hold (--init-from leaves them
// out).
inline constexpr const char* kScaleBufferName = "fp8_scale";
inline constexpr const char* kAmaxHistoryBufferName = "fp8_amax_history";

// Gives a module the FP8 state buffers; shared by the FP8 layers.
class Fp8Module : public nn::Module {
 public:
  const std::shared_ptr<ScalingState>& fp8_state() const { return state_; }
  // Truncates (keeping rows H[0..len-1]) or zero-pads (at the end) the amax history to `len`
  // rows, as TransformerEngine's adjust_amax_history_length.
  void set_amax_history_len(int64_t len);
  // Forwards run in FP8 (inside an enabled fp8_autocast) since the layer was built: the
  // transformer-engine plugin checks that every FP8 layer ran in the first training step (a
  // forward calling the layer it replaced through a member pointer never reaches it).
  int64_t fp8_forwards() const { return fp8_forwards_; }
  // Refuses incoming FP8 state that no run writes (fp8::check_state_tensors): a scale that is
  // not finite and positive, an amax that is negative or NaN.
  void prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) override;

 protected:
  Fp8Module(std::string name, int64_t amax_history_len);
  // Called at the start of an FP8 forward: inside an enabled Fp8Autocast the history takes the
  // active recipe's amax_history_len, as a TE module re-reads the recipe in every
  // fp8_autocast (a layer built with 1024 rows follows a recipe of 16).
  void follow_active_recipe();

 private:
  std::shared_ptr<ScalingState> state_;
  int64_t fp8_forwards_ = 0;
};

class Linear : public Fp8Module {
 public:
  // New parameters initialised as nn::Linear's.
  Linear(int64_t in_features, int64_t out_features, bool with_bias = true,
         std::optional<DType> dtype = std::nullopt, int64_t amax_history_len = 1024);
  // Takes over an nn::Linear's weight and bias tensors (the same tensors, so parameter
  // handles held elsewhere stay valid).
  static std::shared_ptr<Linear> from_linear(const nn::Linear& linear,
                                             int64_t amax_history_len = 1024);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  WeightCache& weight_cache() { return cache_; }

  Tensor weight;
  Tensor bias;

 private:
  Linear(Tensor weight, Tensor bias, int64_t amax_history_len);
  WeightCache cache_;
};

}  // namespace mantissa::fp8
