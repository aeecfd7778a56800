// Apex's optimisation levels on the CPU (apex_amp_precision.h).
#include "mantissa/train/precisions/apex_amp_precision.h"

#include <fmt/format.h>

#include <cmath>
#include <mutex>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa::train {
namespace {

// Apex's dynamic scaler (apex/amp/scaler.py): init 2^16, x0.5 on overflow, x2 every 2000
// clean steps.
constexpr double kInitScale = 65536.0;
constexpr int64_t kGrowthInterval = 2000;

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "True" || value == "1") return true;
  if (value == "false" || value == "False" || value == "0") return false;
  fail("precision", "amp option '{}' takes true or false, got '{}'", key, value);
}

// Points a parameter's TensorImpl at other contents (and gradient), keeping every handle to
// it, so the optimizer -- which holds handles to the model's parameters -- updates the fp32
// master in place of the fp16 weight (Apex swaps the optimizer's param_groups instead).
struct ImplContents {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  Shape strides;
  DType dtype;
  std::shared_ptr<TensorImpl> grad;
};

ImplContents contents_of(const Tensor& t) {
  const TensorImpl& i = t.impl();
  return {i.storage, i.offset, i.strides, i.dtype, i.grad};
}

void set_contents(const Tensor& t, const ImplContents& c) {
  TensorImpl& i = t.impl();
  i.storage = c.storage;
  i.offset = c.offset;
  i.strides = c.strides;
  i.dtype = c.dtype;
  i.grad = c.grad;
}

// fp32 copy of a gradient divided by `scale`; sets *found_inf when an element is inf/NaN.
Tensor unscaled_fp32(const Tensor& grad, double scale, bool* found_inf) {
  Tensor g = grad.to(kFloat32).contiguous();
  if (g.storage() == grad.storage()) g = g.clone();  // never scale the original in place
  float* d = g.data<float>();
  const float inv = static_cast<float>(1.0 / scale);
  bool inf = false;
  const int64_t n = g.numel();
  for (int64_t k = 0; k < n; ++k) {
    inf = inf || !std::isfinite(d[k]);
    d[k] *= inv;
  }
  *found_inf = *found_inf || inf;
  return g;
}

}  // namespace

ApexOptLevel apex_opt_level_from_string(const std::string& level) {
  if (level == "O0") return ApexOptLevel::kO0;
  if (level == "O1") return ApexOptLevel::kO1;
  if (level == "O2") return ApexOptLevel::kO2;
  if (level == "O3") return ApexOptLevel::kO3;
  fail("precision",
       "unknown amp_level '{}'; Apex's optimisation levels are O0, O1, O2 and O3 "
       "(the letter O, not zero)",
       level);
}

const char* apex_opt_level_name(ApexOptLevel level) {
  static const char* names[] = {"O0", "O1", "O2", "O3"};
  return names[static_cast<int>(level)];
}

std::string apex_deprecation_warning() {
  return "amp_backend='apex' reproduces NVIDIA Apex's optimisation levels, whose integration "
         "Lightning deprecated in 1.9 and removed in 2.0 (Apex's amp is deprecated upstream); "
         "the native backend is recommended: `--precision 16-mixed` (= O1) or "
         "`--precision bf16-mixed`";
}

ApexAmpPrecision::ApexAmpPrecision(ApexAmpOptions options) : options_(std::move(options)) {
  const ApexOptLevel l = options_.level;
  casts_model_ = l == ApexOptLevel::kO2 || l == ApexOptLevel::kO3;
  keep_bn_fp32_ = options_.keep_batchnorm_fp32.value_or(l == ApexOptLevel::kO2);
  master_weights_ = options_.master_weights.value_or(l == ApexOptLevel::kO2);
  MANTISSA_CHECK(casts_model_ || !options_.keep_batchnorm_fp32.has_value(), "precision",
                 "keep_batchnorm_fp32 applies to O2 and O3 (the levels that cast the model to "
                 "fp16); {} keeps every weight in fp32",
                 apex_opt_level_name(l));
  MANTISSA_CHECK(casts_model_ || !options_.master_weights.value_or(false), "precision",
                 "master_weights applies to O2 and O3; {} keeps fp32 weights, which are their "
                 "own masters",
                 apex_opt_level_name(l));
  const std::string ls = options_.loss_scale.value_or(
      l == ApexOptLevel::kO1 || l == ApexOptLevel::kO2 ? "dynamic" : "1.0");
  if (ls == "dynamic") {
    dynamic_ = true;
    scale_ = kInitScale;
  } else {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(ls, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    // Decimal only: stod also reads hex ("0x10" was a scale of 16).
    MANTISSA_CHECK(used == ls.size() && used > 0 && std::isfinite(v) && v > 0 &&
                       ls.find_first_not_of("0123456789.eE+-") == std::string::npos,
                   "precision",
                   "loss_scale must be 'dynamic' or a positive number like 128.0, got '{}'", ls);
    scale_ = v;
  }
  if (l == ApexOptLevel::kO1) {
    MANTISSA_CHECK(dynamic_, "precision",
                   "O1 runs the native 16-mixed path, whose GradScaler is dynamic; a static "
                   "loss_scale ({}) is supported with O0, O2 and O3",
                   ls);
    o1_ = std::make_unique<MixedPrecision>("16-mixed");
  }
  MANTISSA_CHECK(l != ApexOptLevel::kO0 || !dynamic_, "precision",
                 "O0 is pure fp32 training; it takes no dynamic loss scale");
}

double ApexAmpPrecision::loss_scale() const {
  if (o1_) return const_cast<MixedPrecision&>(*o1_).scaler()->get_scale();
  return scale_;
}

Tensor ApexAmpPrecision::master_of(const Tensor& param) const {
  auto it = masters_.find(&param.impl());
  return it == masters_.end() ? Tensor() : it->second.master;
}

void ApexAmpPrecision::convert_module(nn::Module& module) {
  if (!casts_model_) return;
  NoGradGuard no_grad;
  // BatchNorm's values, kept exactly (a round trip through fp16 would round them).
  std::vector<std::pair<Tensor, Tensor>> kept;  // (tensor, fp32 value)
  std::vector<nn::Module*> batch_norms;
  if (keep_bn_fp32_) {
    for (auto& [name, m] : module.named_modules()) {
      if (dynamic_cast<nn::BatchNorm2d*>(m) == nullptr) continue;
      batch_norms.push_back(m);
      for (const auto& [n, t] : m->named_parameters(false)) kept.emplace_back(t, t.clone());
      for (const auto& [n, t] : m->named_buffers(false))
        if (t.is_floating_point()) kept.emplace_back(t, t.clone());
    }
  }
  std::vector<std::pair<Tensor, Tensor>> originals;
  if (master_weights_)
    for (const Tensor& p : module.parameters()) originals.emplace_back(p, p.to(kFloat32).clone());
  module.to(kFloat16);
  for (nn::Module* m : batch_norms) m->to(kFloat32);
  for (auto& [t, v] : kept) mantissa::detail::copy_unchecked(t, v);
  for (auto& [p, v] : originals)
    if (p.dtype() == kFloat16) masters_[&p.impl()] = {p, v};
}

ScopePtr ApexAmpPrecision::forward_context() { return o1_ ? o1_->forward_context() : nullptr; }

data::Example ApexAmpPrecision::convert_input(const data::Example& batch) const {
  if (!casts_model_) return batch;
  // Apex O2/O3 patch forward to cast floating inputs to fp16; targets stay as they are.
  data::Example out = batch;
  if (out.input.defined() && out.input.is_floating_point()) out.input = out.input.to(kFloat16);
  return out;
}

Tensor ApexAmpPrecision::convert_output(const Tensor& output) const {
  if (!casts_model_ || !output.defined() || output.dtype() != kFloat16) return output;
  return output.to(kFloat32);  // differentiable: the gradient comes back as fp16
}

Tensor ApexAmpPrecision::pre_backward(const Tensor& loss) {
  if (o1_) return o1_->pre_backward(loss);
  if (scale_ == 1.0) return loss;
  // As apex's scale_loss: the loss is widened to fp32 before scaling, so a scaled fp16 loss
  // cannot overflow.
  return mul(loss.to(kFloat32), scale_);
}

bool ApexAmpPrecision::optimizer_step(optim::Optimizer& optimizer,
                                      const std::function<Tensor()>& closure,
                                      const std::function<void()>& after_closure) {
  if (o1_) return o1_->optimizer_step(optimizer, closure, after_closure);
  if (!casts_model_ && scale_ == 1.0)
    return Precision::optimizer_step(optimizer, closure, after_closure);
  return step_fp16(optimizer, closure, after_closure);
}

bool ApexAmpPrecision::step_fp16(optim::Optimizer& optimizer,
                                 const std::function<Tensor()>& closure,
                                 const std::function<void()>& after_closure) {
  const Tensor loss = closure();
  if (!loss.defined()) {
    after_closure();
    return false;
  }
  NoGradGuard no_grad;
  if (resync_masters_) {
    for (auto& [impl, m] : masters_) mantissa::detail::copy_unchecked(m.master, m.param);
    resync_masters_ = false;
  }
  bool found_inf = false;
  std::vector<std::pair<Tensor, ImplContents>> swapped;  // parameter, its fp16 contents
  for (const Tensor& p : optimizer.parameters()) {
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    const Tensor g32 = unscaled_fp32(grad, scale_, &found_inf);
    auto it = masters_.find(&p.impl());
    if (it != masters_.end()) {
      // The optimizer sees the fp32 master and its fp32 gradient (and keeps fp32 state).
      swapped.emplace_back(p, contents_of(p));
      const Tensor& m = it->second.master;
      set_contents(p, {m.storage(), m.offset(), m.strides(), kFloat32, g32.impl_ptr()});
    } else {
      p.set_grad(g32.to(p.dtype()));  // fp32 parameters (BatchNorm), or O3's fp16 ones
    }
  }
  after_closure();  // hooks and clipping see unscaled (master) gradients
  bool stepped = false;
  if (dynamic_ && found_inf) {
    scale_ *= 0.5;
    growth_tracker_ = 0;
    ++skipped_steps_;
  } else {
    optimizer.step();
    stepped = true;
    if (dynamic_ && ++growth_tracker_ == kGrowthInterval) {
      scale_ *= 2.0;
      growth_tracker_ = 0;
    }
  }
  for (auto& [p, fp16] : swapped) {
    // The fp16 weight is the updated master rounded to nearest.
    const Tensor& m = masters_.at(&p.impl()).master;
    const Tensor w = m.to(kFloat16).contiguous();
    set_contents(p, {w.storage(), w.offset(), w.strides(), kFloat16, fp16.grad});
  }
  return stepped;
}

void ApexAmpPrecision::clip_gradients(optim::Optimizer& optimizer, double clip_val,
                                      GradClipAlgorithm algorithm) {
  if (o1_) return o1_->clip_gradients(optimizer, clip_val, algorithm);
  Precision::clip_gradients(optimizer, clip_val, algorithm);
}

std::optional<Precision::LossScaleState> ApexAmpPrecision::loss_scale_state() {
  if (o1_) return Precision::loss_scale_state();
  if (!dynamic_) return std::nullopt;
  return LossScaleState{scale_, skipped_steps_};
}

nlohmann::json ApexAmpPrecision::state_dict() const {
  if (o1_) return o1_->state_dict();
  return {{"amp_level", apex_opt_level_name(options_.level)},
          {"loss_scale", scale_},
          {"growth_tracker", growth_tracker_},
          {"skipped_steps", skipped_steps_}};
}

void ApexAmpPrecision::load_state_dict(const nlohmann::json& state) {
  if (o1_) return o1_->load_state_dict(state);
  if (state.empty()) return;
  MANTISSA_CHECK(state.is_object() && state.value("amp_level", "") ==
                                          std::string(apex_opt_level_name(options_.level)),
                 "precision", "the checkpoint's Apex state is for another amp_level than {}",
                 apex_opt_level_name(options_.level));
  const auto& s = state.at("loss_scale");
  MANTISSA_CHECK(s.is_number() && std::isfinite(s.get<double>()) && s.get<double>() > 0,
                 "precision", "the checkpoint's Apex loss_scale is not a positive number");
  scale_ = s.get<double>();
  growth_tracker_ = state.value("growth_tracker", int64_t{0});
  skipped_steps_ = state.value("skipped_steps", int64_t{0});
  resync_masters_ = true;  // the weights were loaded after convert_module took the masters
}

std::unique_ptr<Precision> make_apex_amp_precision(const PrecisionOptions& options) {
  check_precision_options(options,
                          {"amp_level", "keep_batchnorm_fp32", "master_weights", "loss_scale"});
  MANTISSA_CHECK(options.precision == "16-mixed", "precision",
                 "You passed `Trainer(amp_backend='apex', precision='{}')` but it's not "
                 "supported: Apex levels run with precision '16-mixed'. Try "
                 "amp_backend='native' instead.",
                 options.precision);
  static std::once_flag once;
  std::call_once(once,
                 [] { fmt::print(stderr, "mantissa: warning: {}\n", apex_deprecation_warning()); });
  ApexAmpOptions o;
  const auto& x = options.extra;
  if (auto it = x.find("amp_level"); it != x.end())
    o.level = apex_opt_level_from_string(it->second);
  if (auto it = x.find("keep_batchnorm_fp32"); it != x.end())
    o.keep_batchnorm_fp32 = parse_bool(it->first, it->second);
  if (auto it = x.find("master_weights"); it != x.end())
    o.master_weights = parse_bool(it->first, it->second);
  if (auto it = x.find("loss_scale"); it != x.end()) o.loss_scale = it->second;
  return std::make_unique<ApexAmpPrecision>(std::move(o));
}

}  // namespace mantissa::train
