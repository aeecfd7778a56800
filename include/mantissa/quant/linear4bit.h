#pragma once
// quant::Linear4bit: a Linear layer whose weight is stored in NF4 or FP4 (bitsandbytes'
// Linear4bit / LinearNF4 / LinearFP4), optionally with double-quantized absmax. The weight is
// frozen (no gradient, not a parameter); the bias stays a trainable fp32 parameter. Forward is
// y = x W^T + b computed in `compute_dtype` with W dequantized on the fly; the output comes back
// in the input's dtype. Backward gives the input gradient grad_y W (and the bias gradient),
// never a weight gradient, which is what QLoRA trains adapters on.
//
// state_dict() holds bitsandbytes' keys: "weight" (packed uint8), "weight.absmax",
// "weight.quant_map", ["weight.nested_absmax", "weight.nested_quant_map",]
// "weight.quant_state.bitsandbytes__nf4" and "bias", so a saved file loads into bitsandbytes and
// back here bit for bit. docs/quantization.md.
#include <memory>

#include "mantissa/core/generator.h"
#include "mantissa/core/quantized_tensor.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"

namespace mantissa::quant {

struct Linear4bitOptions {
  FormatId format = FormatId::kNf4;  // kNf4 or kFp4
  bool double_quant = false;         // bitsandbytes' compress_statistics ("-dq" precisions)
  DType compute_dtype = kBFloat16;   // bf16 (default), fp16 or fp32
  int64_t blocksize = 64;
};

class Linear4bit : public nn::Module {
 public:
  // Draws the weight as nn::Linear(in, out, bias, kFloat32, gen) would (the same values for the
  // same generator state) but quantizes it block by block as it is drawn, so the full-precision
  // weight never exists: peak memory stays near the quantized size.
  Linear4bit(int64_t in_features, int64_t out_features, bool with_bias = true,
             const Linear4bitOptions& options = {}, Generator* gen = nullptr);
  // Wraps an already quantized weight [out, in] and an optional bias (copied to fp32).
  Linear4bit(QuantizedTensor weight, const Tensor& bias, const Linear4bitOptions& options);

  // Quantizes an existing layer's weight (in its own dtype, as bitsandbytes does) and copies
  // its bias. The result's bias is a new tensor; the source layer is left untouched.
  static std::shared_ptr<Linear4bit> from_linear(const nn::Linear& linear,
                                                 const Linear4bitOptions& options = {});

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Linear4bitOptions& options() const { return options_; }
  void set_compute_dtype(DType dtype);

  // The quantized weight (its tensors are this module's buffers).
  const QuantizedTensor& quantized_weight() const;
  // W in `dtype` [out, in], e.g. for a reference computation or merging adapters.
  Tensor dequantized_weight(DType dtype = kFloat32) const;
  // Elements of W and the bytes stored for them (QuantizedTensor::stored_bytes).
  int64_t weight_numel() const { return in_features_ * out_features_; }
  int64_t weight_stored_bytes() const { return quantized_weight().stored_bytes(); }

  Tensor bias;  // (out_features) fp32, trainable; undefined without bias

 private:
  void register_weight();

  int64_t in_features_;
  int64_t out_features_;
  Linear4bitOptions options_;
  mutable QuantizedTensor weight_;
  Tensor state_json_;  // the "weight.quant_state..." buffer; nested_offset is read from it
  mutable const void* parsed_storage_ = nullptr;
  mutable uint64_t parsed_version_ = ~uint64_t{0};
};

// y = x W^T + b with W quantized, as one autograd node (gradients for x and b). x and b must
// already be in the compute dtype; W is decoded for the forward product and again in backward,
// so the graph keeps no full-size weight alive, and no product holds W dequantized in full: the
// AVX2 level decodes its blocks inside the GEMM's packing, AMX CPUs decode a few rows per thread
// into tiles for up to 768 input rows, and otherwise W is dequantized a chunk of at most
// four_bit_chunk_bytes() at a time, one GEMM per chunk (docs/quantization.md).
Tensor linear_4bit(const Tensor& input, const QuantizedTensor& weight, const Tensor& bias);

// The chunk budget of linear_4bit's dequantising path, in bytes of dequantized weight (default
// 1 MiB: a 1024 x 512 bf16 slice; a smaller weight is one chunk). Chunks are whole multiples of
// 64 rows (forward) or columns (input gradient) of W, at least one such multiple. Smaller
// budgets cost speed (bench_linear4bit: 256 KiB took the GPT's 2048-token shapes from 1.05 to
// 0.85 of bf16); tests set small ones to exercise the chunks.
int64_t four_bit_chunk_bytes();
void set_four_bit_chunk_bytes(int64_t bytes);

}  // namespace mantissa::quant
