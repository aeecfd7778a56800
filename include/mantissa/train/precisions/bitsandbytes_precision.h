#pragma once
// BitsandbytesPrecision: Lightning's plugin of the same name, on the CPU. It replaces a model's
// Linear layers by 4-bit (NF4/FP4, optionally double-quantized) or 8-bit (LLM.int8) layers,
// byte-compatible with bitsandbytes:
//
//   precision      layer              weight storage                             trains
//   nf4            Linear4bit nf4     4-bit codes + fp32 absmax per 64           no (frozen)
//   nf4-dq         Linear4bit nf4 DQ  4-bit codes + uint8 absmax + fp32 per 256  no (frozen)
//   fp4, fp4-dq    as nf4 with bnb's FP4 code table                              no (frozen)
//   int8           Linear8bitLt       int8 rows + fp32 row scales, outliers >= 6 no (frozen)
//   int8-training  Linear8bitLt       half-precision weight, int8 inside matmul  yes
//
// Frozen quantized weights are what LoRA adapters are trained on top of (QLoRA; nn/lora.h).
//
// Where it differs from Lightning (docs/quantization.md has the details):
// - Parameters that are not quantized stay float32 and the step runs under CPU autocast to
//   the compute dtype (bf16 by default), like "bf16-mixed"; Lightning sets the default dtype
//   instead. A float32 compute dtype runs without autocast.
// - The init scopes (Trainer::init_module, configure_model) quantize while the model is built:
//   the first module that registers a child is taken as the root, and each time the root
//   registers a child, the Linear layers under its earlier children (which its constructor has
//   moved past) are quantized, so the model is never fully materialised in float32. The
//   root's last child is left to convert_module at setup, which also handles models built
//   outside the scope. A model must therefore register a first child before it builds nested
//   modules whose Linear weights it writes afterwards (mantissa's models do).
// - convert_module replaces every nn::Linear still present (not only when none is quantized
//   yet), skips the adapters of LoRA layers, and throws only when the model has no Linear
//   and no quantized layer at all.
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mantissa/nn/linear.h"
#include "mantissa/quant/weight_quantization.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

// The WeightQuantization of a precision's registry line ("nf4-dq": nf4 with double
// quantization). Throws, listing the quantizing precisions, for a name whose line has none.
quant::WeightQuantization weight_quantization_of(const std::string& precision);
// The canonical name of the precision whose registry line holds `weights`.
std::string precision_of(const quant::WeightQuantization& weights);

// What the quantized layers of a model store (for `mantissa info` and the metrics).
struct QuantizedStats {
  int64_t layers = 0;        // quantized layers
  int64_t weight_numel = 0;  // weight elements they represent
  // Of those, the ones held as frozen buffers (4-bit codes, int8 codes), not as parameters:
  // all but int8-training's, whose weights stay trainable parameters.
  int64_t buffer_weight_numel = 0;
  int64_t stored_bytes = 0;  // bytes they store for those weights (codes, scales, states)
  double bits_per_parameter() const {
    return weight_numel
               ? 8.0 * static_cast<double>(stored_bytes) / static_cast<double>(weight_numel)
               : 0.0;
  }
};

class BitsandbytesPrecision : public Precision {
 public:
  // dtype: the compute dtype of the quantized layers and the autocast dtype of the rest:
  // bfloat16, float16 or float32; anything else throws. Unset, it is Lightning's default:
  // bfloat16 for the 4-bit modes, float16 for int8 and int8-training. ignore_modules: qualified
  // names of Linear layers to keep as they are, matched as string prefixes of the dotted
  // name as Lightning does ("h0" keeps every Linear under "h0"). device_type: where the model
  // runs, the device of the forward's autocast (kCUDA for the 4-bit modes on a GPU).
  // precision: a quantizing precision's name; its registry line gives the weight format.
  explicit BitsandbytesPrecision(const std::string& precision,
                                 std::optional<DType> dtype = std::nullopt,
                                 std::vector<std::string> ignore_modules = {},
                                 DeviceType device_type = DeviceType::kCPU);

  std::string precision() const override { return precision_; }
  std::string class_name() const override { return "BitsandbytesPrecision"; }
  DType param_dtype() const override { return kFloat32; }

  void convert_module(nn::Module& module) override;
  ScopePtr tensor_init_context() override { return module_init_context(); }
  ScopePtr module_init_context() override;
  ScopePtr forward_context() override;

  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  const quant::WeightQuantization& weights() const { return weights_; }
  DType dtype() const { return dtype_; }
  const std::vector<std::string>& ignore_modules() const { return ignore_modules_; }
  // Whether layer m, at qualified_name in the module being converted, stays as it is: its name
  // starts with an ignore_modules prefix, or an earlier conversion kept it. (The command line
  // converts the bare model before the Trainer converts the TrainModule around it, whose names
  // carry one more component; a layer kept by name the first time must not be quantized the
  // second.)
  bool ignored(const std::string& qualified_name, const nn::Module& m) const;

  // The quantized replacement of one Linear (its weight quantized, its bias copied).
  std::shared_ptr<nn::Module> quantize(const nn::Linear& linear) const;
  // Sums over every quantized layer of root.
  static QuantizedStats quantized_stats(const nn::Module& root);
  // Whether m is one of the quantized layer types.
  static bool is_quantized_layer(const nn::Module& m);

 private:
  std::string precision_;
  quant::WeightQuantization weights_;
  DType dtype_;
  DeviceType device_type_;
  std::vector<std::string> ignore_modules_;
  mutable std::set<const nn::Module*> kept_;  // layers an ignore_modules prefix kept
  bool converted_ = false;                    // convert_module ran (its names were checked)
};

// How a quantized layer stores its weight (a Linear4bit's format and double quantization, a
// Linear8bitLt's int8 mode), or nullopt for any other module.
std::optional<quant::WeightQuantization> quantized_layer_weights(const nn::Module& m);
// "<name> (<precision>)" for the first `limit` quantized layers of root (in named_modules order)
// and "... N more" after them: what the plugins' refusals list. Empty when root has none.
std::vector<std::string> describe_quantized_layers(const nn::Module& root, size_t limit = 8);

// The plugin for a quantizing precision with the default compute dtype and no ignored modules.
std::unique_ptr<Precision> make_bitsandbytes_precision(const std::string& precision);
// The registry's factory: options.precision names the precision; options.extra may hold "dtype"
// ("bf16", "fp16" or "fp32") and "ignore_modules" (comma-separated qualified names).
std::unique_ptr<Precision> make_bitsandbytes_precision(const PrecisionOptions& options);

}  // namespace mantissa::train
