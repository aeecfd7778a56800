#pragma once
// 8-bit Adam and AdamW with blockwise dynamic quantization of the moments, after
// bitsandbytes' Adam8bit / AdamW8bit (docs/optimizers.md):
//  - m is stored as one byte per element in the signed dynamic map, v in the unsigned one,
//    each with one fp32 absmax per block of 256 elements: 2 bytes + 8/256 bytes per element
//    instead of Adam's 8;
//  - one fused pass per block: dequantise, update m, v and the parameter in fp32, requantise;
//  - parameters with fewer than min_8bit_size (4096) elements, and those given an
//    optim_bits = 32 override, keep fp32 moments;
//  - weight decay is decoupled for both classes (p *= 1 - lr * wd after the Adam step, as
//    bitsandbytes' blockwise kernel does); they differ only in the default weight_decay.
// Gradients must be finite: a NaN or infinite gradient refuses the whole step (throws,
// nothing changes). float16/bfloat16 parameters update in fp32 and are rounded to nearest, or
// keep an fp32 master copy with master_weights.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mantissa/optim/optimizer.h"

namespace mantissa::nn {
class Module;
}

namespace mantissa::optim {

struct Adam8bitOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  // Parameters with fewer elements keep 32-bit state (bitsandbytes' min_8bit_size).
  int64_t min_8bit_size = 4096;
  // float16/bfloat16 parameters only: update an fp32 master copy (+4 bytes per element).
  bool master_weights = false;
};

// AdamW8bit's defaults: weight_decay 0.01.
inline Adam8bitOptions adamw8bit_defaults() {
  Adam8bitOptions o;
  o.weight_decay = 1e-2;
  return o;
}

class Adam8bit : public Optimizer {
 public:
  static constexpr int64_t kBlockSize = 256;

  explicit Adam8bit(std::vector<Tensor> params, const Adam8bitOptions& options = {});

  void add_param_group(std::vector<Tensor> params);
  void add_param_group(std::vector<Tensor> params, const Adam8bitOptions& options);
  const Adam8bitOptions& defaults() const { return defaults_; }
  const Adam8bitOptions& options(size_t group) const;

  std::string_view name() const override { return decoupled_name_ ? "AdamW8bit" : "Adam8bit"; }
  void step() override;
  void step_with_finite_grads() override;
  double lr(size_t group = 0) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override;
  using Optimizer::set_lr;

  // bitsandbytes' GlobalOptimManager.override_config(param, key, value) for one parameter of
  // this optimizer. Keys: "optim_bits" (8 or 32). 32 keeps fp32 moments for the parameter; 8
  // (the default) quantizes them when it has at least min_8bit_size elements. Set it before the
  // parameter's first step; it is saved with the state dict.
  void override_config(const Tensor& param, std::string_view key, int64_t value);
  // Whether the parameter's moments are (or will be) 8-bit.
  bool uses_8bit_state(const Tensor& param) const;

 protected:
  Adam8bit(std::vector<Tensor> params, const Adam8bitOptions& options, bool adamw);

  nlohmann::json group_options_json(size_t group) const override;
  void set_group_options_json(size_t group, const nlohmann::json& options) override;
  void check_loaded_state(size_t group, const ParamState& state) const override;
  HalfPrecisionOptions half_precision(size_t group) const override;
  Tensor loaded_buffer(size_t group, size_t index, const std::string& buffer, const Tensor& saved,
                       const std::string& key) const override;

 private:
  void validate(const Adam8bitOptions& o) const;
  // step(), with or without the scan that refuses a step on a non-finite gradient.
  void step_impl(bool scan_gradients);
  bool is_8bit(size_t group, size_t index) const;
  std::pair<size_t, size_t> locate(const Tensor& param, const char* where) const;

  bool decoupled_name_ = false;
  Adam8bitOptions defaults_;
  std::vector<Adam8bitOptions> options_;
  // Per group and parameter: 0 (no override), 8 or 32.
  std::vector<std::vector<int>> optim_bits_;
};

class AdamW8bit : public Adam8bit {
 public:
  explicit AdamW8bit(std::vector<Tensor> params,
                     const Adam8bitOptions& options = adamw8bit_defaults())
      : Adam8bit(std::move(params), options, /*adamw=*/true) {}
};

// Per-parameter overrides by name, for a model whose parameters an Adam8bit optimizes: every
// parameter whose name (as in model.named_parameters(), e.g. "wte.weight") contains one of
// `name_substrings` gets override_config(param, "optim_bits", bits). A substring that matches
// no parameter throws, listing the closest names. Returns the names overridden.
std::vector<std::string> override_optim_bits(Adam8bit& optimizer, const nn::Module& model,
                                             const std::vector<std::string>& name_substrings,
                                             int bits = 32);
// Every nn::Embedding's weight keeps 32-bit state (bitsandbytes' StableEmbedding does this);
// returns the names overridden.
std::vector<std::string> keep_embeddings_32bit(Adam8bit& optimizer, nn::Module& model);

}  // namespace mantissa::optim
