#pragma once
// quant::Linear8bitLt: bitsandbytes' Linear8bitLt on the CPU (LLM.int8()).
//  - Int8Mode::kInference ("int8"): the weight is stored as int8 rows CB with an fp32 absmax per
//    output row SCB, frozen; forward quantizes the input row-wise, splits off outlier columns
//    (|x| >= threshold, 6.0 by default), multiplies int8 x int8 in int32 and adds the outlier
//    part in floating point; backward gives grad_x = grad_y (CB * SCB / 127) and the bias grad.
//    state_dict: "weight" (int8 [out, in]), "bias", "SCB" (fp32 [out]), "weight_format"
//    (uint8 scalar 0), as bitsandbytes writes.
//  - Int8Mode::kTraining ("int8-training", has_fp16_weights=True): the weight stays a trainable
//    floating parameter, re-quantized to int8 rows for the product whenever it changed (once per
//    optimizer step, however many forwards a step runs: accumulation, recompute); backward
//    gives grad_x through the int8-dequantized weight and grad_W = grad_y^T x in floating point
//    (as bitsandbytes' CPU path). state_dict: "weight", "bias".
#include <memory>

#include "mantissa/core/generator.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"

namespace mantissa::quant {

enum class Int8Mode { kInference, kTraining };

struct Linear8bitOptions {
  Int8Mode mode = Int8Mode::kInference;
  float threshold = 6.0f;          // outlier threshold; 0 turns the decomposition off
  DType compute_dtype = kFloat16;  // activations are rounded to this first (bitsandbytes: fp16)
};

class Linear8bitLt : public nn::Module {
 public:
  // Draws the weight as nn::Linear(in, out, bias, kFloat32, gen) does. In kInference mode the
  // rows are quantized as they are drawn (never a full fp32 weight); kTraining keeps fp32.
  Linear8bitLt(int64_t in_features, int64_t out_features, bool with_bias = true,
               const Linear8bitOptions& options = {}, Generator* gen = nullptr);
  // kInference quantizes linear.weight (rows); kTraining copies it. The bias is copied.
  static std::shared_ptr<Linear8bitLt> from_linear(const nn::Linear& linear,
                                                   const Linear8bitOptions& options = {});

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // kInference: a full-precision weight of this layer's shape (pretrained weights loaded after
  // the layer was quantized) throws saying the layer is already int8 and where to load them.
  void prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Linear8bitOptions& options() const { return options_; }
  // The weight as the forward product sees it, [out, in] in `dtype`.
  Tensor dequantized_weight(DType dtype = kFloat32) const;
  // Bytes held for the weight: int8 codes + fp32 row scales (kInference), the float weight
  // (kTraining).
  int64_t weight_stored_bytes() const;
  int64_t weight_numel() const { return in_features_ * out_features_; }

  Tensor weight;  // int8 [out, in] buffer (kInference) or floating parameter (kTraining)
  Tensor scb;     // fp32 [out] row absmax (kInference only)
  Tensor bias;    // fp32 [out], trainable

 private:
  Linear8bitLt(int64_t in_features, int64_t out_features, const Linear8bitOptions& options);
  void init_inference(const Tensor& cb, const Tensor& scb_values);
  // kTraining: the weight's int8 rows, made again when the weight's storage, its version (an
  // optimizer step or any in-place write bumps it) or its view changed.
  void refresh_training_codes();

  struct TrainingCodes {
    std::weak_ptr<Storage> storage;
    uint64_t version = 0;
    int64_t offset = 0;
    Shape shape;
    Tensor codes, absmax;
  };
  TrainingCodes training_codes_;

  int64_t in_features_;
  int64_t out_features_;
  Linear8bitOptions options_;
};

// The op: y = LLM.int8(x, W) + b with a graph node (grad for x, bias and, when `weight_param`
// is a defined floating tensor requiring grad, for it). x and bias in the compute dtype.
Tensor linear_int8(const Tensor& input, const Tensor& cb, const Tensor& scb, const Tensor& bias,
                   float threshold, const Tensor& weight_param = Tensor());

}  // namespace mantissa::quant
