// Linear8bitLt: construction, bitsandbytes' keys and the LLM.int8 node.
#include "mantissa/quant/linear8bit.h"
#include "mantissa/core/managed_precision.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/nn/lora.h"
#include "mantissa/quant/int8.h"
#include "quant/layer_output_dtype.h"

namespace mantissa::quant {
namespace {

constexpr const char* kWhere = "Linear8bitLt";

void check_options(const Linear8bitOptions& o) {
  const DType c = o.compute_dtype;
  MANTISSA_CHECK(c == kBFloat16 || c == kFloat16 || c == kFloat32, kWhere,
                 "compute_dtype must be float16, bfloat16 or float32, got {}", c.name());
  MANTISSA_CHECK(o.threshold >= 0.0f && std::isfinite(o.threshold), kWhere,
                 "threshold must be finite and >= 0, got {}", o.threshold);
}

// As Linear4bit's (linear4bit.cpp): the first layer built makes it Linear-like for
// nn::apply_lora, with or without the bitsandbytes plugin.
void register_for_lora() { nn::register_linear_like_once<Linear8bitLt>("quant::Linear8bitLt"); }

}  // namespace

Linear8bitLt::Linear8bitLt(int64_t in_features, int64_t out_features,
                           const Linear8bitOptions& options)
    : Module("Linear8bitLt"),
      in_features_(in_features),
      out_features_(out_features),
      options_(options) {
  check_options(options);
  register_for_lora();
  MANTISSA_CHECK(in_features > 0 && out_features > 0, kWhere,
                 "feature counts must be positive, got in_features={} out_features={}", in_features,
                 out_features);
}

void Linear8bitLt::init_inference(const Tensor& cb, const Tensor& scb_values) {
  weight = register_buffer("weight", cb);
  scb = register_buffer("SCB", scb_values, /*keep_dtype=*/true);
  register_buffer("weight_format", zeros({}, kUInt8));
}

Linear8bitLt::Linear8bitLt(int64_t in_features, int64_t out_features, bool with_bias,
                           const Linear8bitOptions& options, Generator* gen)
    : Linear8bitLt(in_features, out_features, options) {
  Generator& g = gen ? *gen : default_generator();
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  auto draw = [&](float* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(-bound + 2 * bound * g.uniform());
  };
  if (options.mode == Int8Mode::kTraining) {
    Tensor w = empty({out_features, in_features}, kFloat32);
    draw(w.data<float>(), w.numel());
    weight = register_parameter("weight", w);
  } else {
    // Row blocks of 64 are drawn and quantized in turn (row-wise scales need whole rows).
    Tensor cb = empty({out_features, in_features}, kInt8);
    Tensor s = empty({out_features}, kFloat32);
    constexpr int64_t kRows = 64;
    for (int64_t r0 = 0; r0 < out_features; r0 += kRows) {
      const int64_t rows = std::min(kRows, out_features - r0);
      Tensor block = empty({rows, in_features}, kFloat32);
      draw(block.data<float>(), block.numel());
      const Int8Rows q = quantize_int8_rows(block, 0.0f);
      std::copy_n(q.codes.data<int8_t>(), q.codes.numel(), cb.data<int8_t>() + r0 * in_features);
      std::copy_n(q.absmax.data<float>(), rows, s.data<float>() + r0);
    }
    init_inference(cb, s);
  }
  if (with_bias) {
    Tensor b = empty({out_features}, kFloat32);
    draw(b.data<float>(), out_features);
    bias = register_parameter("bias", b);
  }
}

std::shared_ptr<Linear8bitLt> Linear8bitLt::from_linear(const nn::Linear& linear,
                                                        const Linear8bitOptions& options) {
  std::shared_ptr<Linear8bitLt> m(
      new Linear8bitLt(linear.in_features(), linear.out_features(), options));
  if (options.mode == Int8Mode::kTraining) {
    m->weight = m->register_parameter("weight", linear.weight.detach().clone());
  } else {
    const QuantizedTensor q = quantize_int8_weight(linear.weight);
    m->init_inference(q.data, q.absmax);
  }
  if (linear.bias.defined())
    m->bias = m->register_parameter("bias", linear.bias.detach().to(kFloat32).clone());
  m->train(linear.is_training());
  return m;
}

Tensor Linear8bitLt::dequantized_weight(DType dtype) const {
  if (options_.mode == Int8Mode::kInference) return dequantize_int8_rows(weight, scb, dtype);
  const Int8Rows q = quantize_int8_rows(weight, 0.0f);
  return dequantize_int8_rows(q.codes, q.absmax, dtype);
}

int64_t Linear8bitLt::weight_stored_bytes() const {
  int64_t b = static_cast<int64_t>(weight.nbytes());
  if (scb.defined()) b += static_cast<int64_t>(scb.nbytes());
  return b;
}

void Linear8bitLt::prepare_load_state_dict(const std::string& prefix, const nn::StateDict& state) {
  // Only the int8 weight is a buffer of another dtype; int8-training's float weight loads.
  if (options_.mode != Int8Mode::kInference || state.contains(prefix + "SCB")) return;
  // A full-precision [out, in] weight and no row scales: pretrained weights loaded after the
  // layer was quantized (under BitsandbytesPrecision, in configure_model), which
  // load_state_dict alone reported as a float32-into-int8 dtype mismatch and missing SCB and
  // weight_format, without a word about quantization.
  const std::string name = prefix + "weight";
  const Tensor w = state.contains(name) ? state.at(name) : Tensor();
  if (w.defined() && w.is_floating_point() && w.shape() == weight.shape()) {
    fail(kWhere,
         "\"{}weight\" is a full-precision weight of shape {}, but this layer is already "
         "int8-quantized (mode int8: int8 rows and fp32 row scales SCB): load full-precision "
         "weights before the layer is quantized (a TrainModule under BitsandbytesPrecision: in "
         "its constructor, not in configure_model, whose layers the plugin quantizes as they are "
         "built), or quantize them yourself with Linear8bitLt::from_linear (docs/qlora.md)",
         prefix, shape_str(w.shape()));
  }
}

Tensor Linear8bitLt::forward(const Tensor& input) {
  // Any float input is cast to the compute dtype and the output back (bitsandbytes' rule).
  MANTISSA_CHECK(input.is_floating_point() && !input.dtype().is_float8(), kWhere,
                 "input must be float64, float32, bfloat16 or float16 (cast to the compute "
                 "dtype {}), got {}",
                 options_.compute_dtype.name(), input.dtype().name());
  const DType cd = options_.compute_dtype;
  const Tensor x = input.to(cd);
  InternalCastScope internal;  // the layer's compute dtype, not a cast by hand
  const Tensor b = bias.defined() ? bias.to(cd) : Tensor();
  Tensor y;
  if (options_.mode == Int8Mode::kInference) {
    y = linear_int8(x, weight, scb, b, options_.threshold);
  } else {
    refresh_training_codes();
    y = linear_int8(x, training_codes_.codes, training_codes_.absmax, b, options_.threshold,
                    weight);
  }
  return y.to(layer_output_dtype(input, cd));
}

void Linear8bitLt::refresh_training_codes() {
  TrainingCodes& c = training_codes_;
  const TensorImpl& w = weight.impl();
  if (c.codes.defined() && c.storage.lock() == w.storage && c.version == w.storage->version() &&
      c.offset == w.offset && c.shape == w.shape)
    return;
  const Int8Rows q = quantize_int8_rows(weight, 0.0f);
  c = TrainingCodes{.storage = w.storage,
                    .version = w.storage->version(),
                    .offset = w.offset,
                    .shape = w.shape,
                    .codes = q.codes,
                    .absmax = q.absmax};
}

std::string Linear8bitLt::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}, mode={}, threshold={}",
                     in_features_, out_features_, bias.defined(),
                     options_.mode == Int8Mode::kInference ? "int8" : "int8-training",
                     options_.threshold);
}

Tensor linear_int8(const Tensor& input, const Tensor& cb, const Tensor& scb, const Tensor& bias,
                   float threshold, const Tensor& weight_param) {
  const DType cd = input.dtype();
  Tensor y = int8_linear_nograd(input, cb, scb, bias, threshold);
  const bool has_w = weight_param.defined() && weight_param.requires_grad();
  if (!autograd::needs_grad({&input, &bias, &weight_param})) return y;
  const int64_t out_f = cb.size(0), in_f = cb.size(1);
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const bool need_x = input.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const Tensor saved_x = has_w ? input.detach().reshape({rows, in_f}) : Tensor();
  const DType wdt = has_w ? weight_param.dtype() : cd;
  // Only the input (read by the weight's gradient) is version-checked: cb and scb are the
  // layer's int8 buffers or this step's quantization, which no optimizer writes in place.
  return autograd::record(
      y, {input, bias, weight_param}, {saved_x}, "Linear8bitLtBackward", [=](const Tensor& grad) {
        const Tensor g2 = (grad.dtype() == cd ? grad : grad.to(cd)).reshape({rows, out_f});
        std::vector<Tensor> grads(3);
        if (need_x)
          grads[0] = gemm::gemm(gemm::dense(g2), gemm::dense(dequantize_int8_rows(cb, scb, cd)))
                         .view(x_shape);
        if (need_b) grads[1] = kernels::sum_rows(g2);  // as nn::Linear's bias gradient
        if (has_w) {                                   // (out, R) @ (R, in)
          if (cd == kBFloat16 && wdt == kFloat32) {
            // bf16 operands as bitsandbytes' compute dtype gives them, summed into the fp32
            // accumulator that is the gradient itself (no widened copies of g and x).
            gemm::Epilogue e;
            e.out_dtype = kFloat32;
            grads[2] = gemm::gemm(gemm::dense(g2).t(), gemm::dense(saved_x), e);
          } else {
            grads[2] = gemm::gemm(gemm::dense(g2.to(wdt)).t(), gemm::dense(saved_x.to(wdt)));
          }
        }
        return grads;
      });
}

}  // namespace mantissa::quant
