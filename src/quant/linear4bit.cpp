// Linear4bit: construction (drawn-and-quantized, from a Linear, or from a quantized weight),
// the bitsandbytes state-dict layout, and the forward/backward node.
#include "mantissa/quant/linear4bit.h"
#include "mantissa/core/managed_precision.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/default_dtype.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/nn/lora.h"
#include "mantissa/quant/bnb_format.h"
#include "mantissa/quant/quantize.h"
#include "quant/layer_output_dtype.h"

namespace mantissa::quant {
namespace {

constexpr const char* kWhere = "Linear4bit";

void check_options(const Linear4bitOptions& o) {
  MANTISSA_CHECK(formats::has_layout(o.format, 4, formats::ScaleFormat::kFp32PerBlock), kWhere,
                 "format must be nf4 or fp4, got {}", formats::format_name(o.format));
  const DType c = o.compute_dtype;
  MANTISSA_CHECK(c == kBFloat16 || c == kFloat16 || c == kFloat32, kWhere,
                 "compute_dtype must be bfloat16, float16 or float32, got {}", c.name());
}

// nn::apply_lora wraps only the layers it recognises as Linear-like. The first Linear4bit
// built registers the type, so LoRA works on the layer whether the bitsandbytes plugin or the
// user's own code made it (docs/qlora.md).
void register_for_lora() { nn::register_linear_like_once<Linear4bit>("quant::Linear4bit"); }

FourBitOptions four_bit_options(const Linear4bitOptions& o) {
  return FourBitOptions{o.format, o.blocksize, o.double_quant};
}

}  // namespace

Linear4bit::Linear4bit(int64_t in_features, int64_t out_features, bool with_bias,
                       const Linear4bitOptions& options, Generator* gen)
    : Module("Linear4bit"),
      in_features_(in_features),
      out_features_(out_features),
      options_(options) {
  check_options(options);
  register_for_lora();
  MANTISSA_CHECK(in_features > 0 && out_features > 0, kWhere,
                 "feature counts must be positive, got in_features={} out_features={}", in_features,
                 out_features);
  // nn::Linear's kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), one double draw per
  // element in row-major order rounded to fp32, here consumed a chunk at a time.
  Generator& g = gen ? *gen : default_generator();
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const double low = -bound, high = bound;
  weight_ =
      quantize_4bit_generated({out_features, in_features}, kFloat32, four_bit_options(options),
                              [&](float* out, int64_t, int64_t count) {
                                for (int64_t i = 0; i < count; ++i)
                                  out[i] = static_cast<float>(low + (high - low) * g.uniform());
                              });
  register_weight();
  if (with_bias) {
    Tensor b = empty({out_features}, kFloat32);
    float* p = b.data<float>();
    for (int64_t i = 0; i < out_features; ++i)
      p[i] = static_cast<float>(low + (high - low) * g.uniform());
    bias = register_parameter("bias", b);
  }
}

Linear4bit::Linear4bit(QuantizedTensor weight, const Tensor& b, const Linear4bitOptions& options)
    : Module("Linear4bit"), options_(options) {
  check_options(options);
  register_for_lora();
  MANTISSA_CHECK(weight.defined() && weight.shape.size() == 2, kWhere,
                 "the quantized weight must be 2-D [out_features, in_features]");
  MANTISSA_CHECK(weight.format == options.format && weight.has_nested == options.double_quant &&
                     weight.blocksize == options.blocksize,
                 kWhere,
                 "the quantized weight ({}, double_quant={}, blocksize {}) does not match "
                 "the options ({}, double_quant={}, blocksize {})",
                 formats::format_name(weight.format), weight.has_nested, weight.blocksize,
                 formats::format_name(options.format), options.double_quant, options.blocksize);
  out_features_ = weight.shape[0];
  in_features_ = weight.shape[1];
  weight_ = std::move(weight);
  register_weight();
  if (b.defined()) {
    MANTISSA_CHECK(b.dim() == 1 && b.size(0) == out_features_, kWhere,
                   "bias of shape {} does not match out_features {}", shape_str(b.shape()),
                   out_features_);
    bias = register_parameter("bias", b.detach().to(kFloat32).clone());
  }
}

std::shared_ptr<Linear4bit> Linear4bit::from_linear(const nn::Linear& linear,
                                                    const Linear4bitOptions& options) {
  check_options(options);
  QuantizedTensor q = quantize_4bit(linear.weight, four_bit_options(options));
  auto m = std::make_shared<Linear4bit>(std::move(q), linear.bias, options);
  m->train(linear.is_training());
  return m;
}

void Linear4bit::register_weight() {
  // bitsandbytes' order: weight, bias, then the quant state entries (the bias is registered
  // after this, and state_dict lists parameters before buffers, so "bias" comes first; the
  // order inside a file is fixed by the safetensors writer anyway).
  // The codes and scales follow Module::to(Device); the code tables and the JSON quant state
  // stay in host memory (the host reads them: the tables travel with each GPU decode).
  for (auto& [name, t] : to_bnb_tensors("weight", weight_)) {
    const bool state = name == "weight." + quant_state_key(weight_.format);
    if (state) state_json_ = t;
    const bool host = state || name == "weight.quant_map" || name == "weight.nested_quant_map";
    register_serialized_buffer(name, t, host);
  }
  parsed_storage_ = state_json_.storage().get();
  parsed_version_ = state_json_.storage()->version();
}

const QuantizedTensor& Linear4bit::quantized_weight() const {
  // load_state_dict may have replaced the quant state; its dtype and nested_offset live there.
  const Storage* s = state_json_.storage().get();
  if (s != parsed_storage_ || s->version() != parsed_version_) {
    const Tensor c = state_json_.contiguous();
    const std::string text(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
    const auto j = nlohmann::json::parse(text);
    const std::string dt = j.at("dtype").get<std::string>();
    weight_.dtype = dt == "bfloat16" ? kBFloat16 : dt == "float16" ? kFloat16 : kFloat32;
    if (weight_.has_nested)
      weight_.nested.offset = static_cast<float>(j.at("nested_offset").get<double>());
    parsed_storage_ = s;
    parsed_version_ = s->version();
  }
  return weight_;
}

void Linear4bit::prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) {
  const std::string key = prefix + "weight." + quant_state_key(weight_.format);
  if (!state.contains(key)) {
    // A full-precision [out, in] weight for this layer: the usual cause is pretrained weights
    // loaded after the layer was quantized (under BitsandbytesPrecision, in configure_model),
    // which load_state_dict alone would report as a size mismatch and missing 4-bit tensors.
    const std::string name = prefix + "weight";
    const Tensor w = state.contains(name) ? state.at(name) : Tensor();
    if (w.defined() && w.is_floating_point() && w.shape() == weight_.shape) {
      // The format as --precision names it: "nf4" for an nf4-dq layer sent its user looking
      // for the wrong mode.
      fail(kWhere,
           "\"{}weight\" is a full-precision weight of shape {}, but this layer is already 4-bit "
           "({}{}): load full-precision weights before the layer is quantized (a TrainModule "
           "under BitsandbytesPrecision: in its constructor, not in configure_model, whose "
           "layers the plugin quantizes as they are built), or quantize them yourself with "
           "Linear4bit::from_linear (docs/qlora.md)",
           prefix, shape_str(w.shape()), formats::format_name(weight_.format),
           weight_.has_nested ? "-dq" : "");
    }
    return;  // load_state_dict reports the missing key
  }
  // Validates the whole incoming quant state (throws naming what is wrong) and checks it fits.
  const QuantizedTensor in = from_bnb_tensors(prefix + "weight", [&](const std::string& k) {
    return state.contains(k) ? state.at(k) : Tensor();
  });
  MANTISSA_CHECK(in.shape == weight_.shape && in.blocksize == weight_.blocksize &&
                     in.has_nested == weight_.has_nested,
                 kWhere,
                 "\"{}weight\" holds a {} weight of shape {} (blocksize {}, "
                 "double_quant={}); this layer has shape {} (blocksize {}, double_quant={})",
                 prefix, formats::format_name(in.format), shape_str(in.shape), in.blocksize,
                 in.has_nested, shape_str(weight_.shape), weight_.blocksize, weight_.has_nested);
  const Tensor& incoming = state.at(key);
  if (incoming.numel() != state_json_.numel()) {  // the JSON text changed length: resize in place
    TensorImpl& impl = state_json_.impl();
    impl.storage = std::make_shared<Storage>(static_cast<size_t>(incoming.numel()));
    impl.shape = {incoming.numel()};
    impl.strides = {1};
    impl.offset = 0;
  }
}

void Linear4bit::set_compute_dtype(DType dtype) {
  Linear4bitOptions o = options_;
  o.compute_dtype = dtype;
  check_options(o);
  options_ = o;
}

Tensor Linear4bit::dequantized_weight(DType dtype) const {
  return dequantize(quantized_weight(), dtype);
}

Tensor Linear4bit::forward(const Tensor& input) {
  const DType cd = options_.compute_dtype;
  // Any float input is cast to the compute dtype and the output back (bitsandbytes' rule).
  MANTISSA_CHECK(input.is_floating_point() && !input.dtype().is_float8(), kWhere,
                 "input must be float64, float32, bfloat16 or float16 (cast to the compute "
                 "dtype {}), got {}",
                 options_.compute_dtype.name(), input.dtype().name());
  const Tensor x = input.to(cd);
  InternalCastScope internal;  // the layer's compute dtype, not a cast by hand
  const Tensor b = bias.defined() ? bias.to(cd) : Tensor();
  return linear_4bit(x, quantized_weight(), b).to(layer_output_dtype(input, cd));
}

std::string Linear4bit::extra_repr() const {
  return fmt::format(
      "in_features={}, out_features={}, bias={}, format={}, double_quant={}, "
      "compute_dtype={}",
      in_features_, out_features_, bias.defined(), formats::format_name(options_.format),
      options_.double_quant, options_.compute_dtype.name());
}

Tensor linear_4bit(const Tensor& input, const QuantizedTensor& weight, const Tensor& bias) {
  MANTISSA_CHECK(weight.defined() && weight.shape.size() == 2, "linear_4bit",
                 "weight must be a 2-D quantized tensor");
  const int64_t out_f = weight.shape[0], in_f = weight.shape[1];
  MANTISSA_CHECK(input.dim() >= 1 && input.size(-1) == in_f, "linear_4bit",
                 "input of shape {} does not match weight of shape {} (expected last dim {})",
                 shape_str(input.shape()), shape_str(weight.shape), in_f);
  const DType cd = input.dtype();
  MANTISSA_CHECK(cd == kFloat32 || cd == kBFloat16 || cd == kFloat16, "linear_4bit",
                 "input must be float32, bfloat16 or float16, got {}", cd.name());
  const Device dev = input.device();
  MANTISSA_CHECK(weight.data.device() == dev && weight.absmax.device() == dev, "linear_4bit",
                 "expected all tensors to be on the same device, but the input is on {} and the "
                 "4-bit weight on {} (move the layer with Module::to)",
                 dev.str(), weight.data.device().str());
  if (bias.defined())
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == out_f && bias.dtype() == cd, "linear_4bit",
                   "bias must be [{}] in {}, got {} in {}", out_f, cd.name(),
                   shape_str(bias.shape()), bias.dtype().name());
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  // Resolved once per forward (one float per block; double quantization decoded here) and kept
  // for the backward: 4 bytes per 64 weights.
  const Tensor absmax = block_absmax(weight);
  const gemm::Operand w4 =
      gemm::four_bit(weight.format, weight.data, weight.shape, weight.blocksize, absmax);
  gemm::Epilogue fwd;
  fwd.bias = bias.defined() ? bias.detach() : Tensor();
  const Tensor y2 =
      rows == 0 ? empty({0, out_f}, cd, dev) : gemm::gemm(gemm::dense(x2), w4.t(), fwd);
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  Tensor y = y2.view(out_shape);
  if (!autograd::needs_grad(input, bias)) return y;
  const bool need_x = input.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  return autograd::record(y, {input, bias}, "Linear4bitBackward", [=](const Tensor& grad) {
    const Tensor g2 = (grad.dtype() == cd ? grad : grad.to(cd)).reshape({rows, out_f});
    std::vector<Tensor> grads(2);
    if (need_x) {
      grads[0] =
          (rows == 0 ? empty({0, in_f}, cd, dev) : gemm::gemm(gemm::dense(g2), w4)).view(x_shape);
    }
    if (need_b) grads[1] = kernels::sum_rows(g2);  // as nn::Linear's bias gradient (GPU too)
    return grads;
  });
}

int64_t four_bit_chunk_bytes() { return gemm::four_bit_chunk_bytes(); }
void set_four_bit_chunk_bytes(int64_t bytes) { gemm::set_four_bit_chunk_bytes(bytes); }

}  // namespace mantissa::quant
