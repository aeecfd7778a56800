// GradScaler bookkeeping: options, lazy state, the per-optimizer stage machine and the state
// dict. The arithmetic lives in the two kernels of kernels/cpu/amp/unscale_kernel.h.
#include "mantissa/optim/grad_scaler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "core/inplace.h"
#include "kernels/cpu/amp/unscale_kernel.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa::amp {
namespace {

constexpr const char* kWhere = "GradScaler";

void check_bound(const std::optional<double>& v, const char* name) {
  if (!v) return;
  MANTISSA_CHECK(std::isfinite(*v) && *v > 0.0, kWhere, "{} must be a finite number > 0, got {}",
                 name, *v);
}

// The scale lives in a float32 tensor: it must be finite and > 0 as a float32 (1e39 would
// become inf, 1e-50 zero).
void check_scale(double v, const char* name) {
  const auto f = static_cast<float>(v);
  MANTISSA_CHECK(std::isfinite(v) && v > 0.0 && std::isfinite(f) && f > 0.0f, kWhere,
                 "{} must be a finite number > 0 that float32 can hold (the loss is multiplied by "
                 "it: 0 or a negative, NaN or infinite scale makes every gradient 0 or NaN and "
                 "every step is skipped), got {}; the default is 65536",
                 name, v);
}

void check_growth_factor(double v) {
  MANTISSA_CHECK(std::isfinite(v) && v > 1.0, kWhere,
                 "The growth factor must be > 1.0. It must also be finite; got {}, the default "
                 "is 2.0",
                 v);
}

void check_backoff_factor(double v) {
  MANTISSA_CHECK(v > 0.0 && v < 1.0, kWhere,
                 "The backoff factor must be < 1.0. It must also be > 0 (it multiplies the "
                 "scale after an inf/NaN step); got {}, the default is 0.5",
                 v);
}

}  // namespace

void GradScaler::set_growth_factor(double v) {
  if (enabled_) check_growth_factor(v);
  growth_factor_ = v;
}

void GradScaler::set_backoff_factor(double v) {
  if (enabled_) check_backoff_factor(v);
  backoff_factor_ = v;
}

GradScaler::GradScaler(const GradScalerOptions& o)
    : enabled_(o.enabled),
      init_scale_(o.init_scale),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval),
      min_scale_(o.min_scale),
      max_scale_(o.max_scale) {
  // Only an enabled scaler validates (as PyTorch). Beyond PyTorch's two checks, every value is
  // held to what load_state_dict accepts, so whatever this scaler saves loads back: a zero,
  // negative, NaN or infinite init_scale (PyTorch takes it) makes every gradient zero or NaN, so
  // no optimizer step would ever run, and the checkpoint it wrote could not be resumed.
  // growth_interval takes any value (<= 0: the scale never grows), as load does.
  if (!enabled_) return;
  check_scale(init_scale_, "init_scale");
  check_growth_factor(growth_factor_);
  check_backoff_factor(backoff_factor_);
  check_bound(min_scale_, "min_scale");
  check_bound(max_scale_, "max_scale");
  if (min_scale_ && max_scale_)
    MANTISSA_CHECK(*min_scale_ <= *max_scale_, kWhere,
                   "min_scale ({}) must not exceed max_scale ({})", *min_scale_, *max_scale_);
}

void GradScaler::check_initialised(const char* funcname) const {
  MANTISSA_CHECK(scale_.defined(), kWhere,
                 "Attempted {} but _scale is None.  This may indicate your script did not use "
                 "scaler.scale(loss or outputs) earlier in the iteration.",
                 funcname);
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  MANTISSA_CHECK(outputs.defined(), kWhere, "outputs must be a Tensor or an iterable of Tensors");
  if (!scale_.defined()) {
    scale_ = scalar_tensor(init_scale_, kFloat32);
    growth_tracker_ = scalar_tensor(static_cast<double>(init_growth_tracker_), kInt32);
  }
  // Multiply by a snapshot: update() changes scale_ in place, and a graph built now must keep
  // the value it was built with (PyTorch would raise a version-counter error instead).
  // On a GPU the snapshot is made there by a fill (the scale itself stays on the host, where
  // update() computes it from the one flag step() reads back): a copy from pageable host memory
  // would wait for every kernel queued before it.
  Tensor s;
  {
    NoGradGuard no_grad;
    s = outputs.is_cuda() ? full({}, scale_.item(), kFloat32, outputs.device()) : scale_.clone();
  }
  return mul(outputs, s);
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!enabled_) return outputs;
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  check_initialised("unscale_");
  PerOptimizer& st = per_optimizer_[&optimizer];
  if (st.stage == OptState::kUnscaled)
    fail(kWhere, "unscale_() has already been called on this optimizer since the last update().");
  if (st.stage == OptState::kStepped) fail(kWhere, "unscale_() is being called after step().");

  // The reciprocal in double, then rounded to float32, as PyTorch does for accuracy.
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale_.item()));
  // Collect first, so an fp16 gradient raises before any gradient is modified. Grads are
  // grouped by dtype and device (first-seen order), one kernel call per group.
  struct Group {
    DType dtype;
    Device device;
    std::vector<Tensor> grads;
  };
  std::vector<Group> groups;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    for (const Tensor& p : optimizer.params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (grad.dtype() == kFloat16) fail(kWhere, "Attempting to unscale FP16 gradients.");
      auto it = groups.begin();
      while (it != groups.end() && (it->dtype != grad.dtype() || it->device != grad.device())) ++it;
      if (it == groups.end()) {
        groups.push_back({grad.dtype(), grad.device(), {}});
        it = groups.end() - 1;
      }
      it->grads.push_back(std::move(grad));
    }
  }
  // found_inf exists only when some gradient was checked; step() relies on that. One flag
  // (and one inv_scale) per device; on a GPU both stay there, so the gradients are checked
  // and unscaled with no host sync.
  std::vector<std::pair<Device, Tensor>> flags, inv_scales;
  auto on = [](std::vector<std::pair<Device, Tensor>>& v, const Device& d, auto make) {
    for (auto& [dev, t] : v)
      if (dev == d) return t;
    v.emplace_back(d, make());
    return v.back().second;
  };
  for (const Group& grp : groups) {
    const Tensor f = on(flags, grp.device, [&] { return zeros({}, kFloat32, grp.device); });
    // A fill, not a copy from the host, on a GPU (see scale()).
    const Tensor i =
        on(inv_scales, grp.device, [&] { return full({}, inv, kFloat32, grp.device); });
    foreach_non_finite_check_and_unscale_(grp.grads, f, i);
  }
  Tensor found_inf;
  if (flags.size() == 1) {
    found_inf = flags[0].second;
  } else if (flags.size() > 1) {
    // Gradients on several devices: one host flag summing theirs.
    double total = 0;
    for (const auto& [dev, f] : flags) total += f.item();
    found_inf = scalar_tensor(total, kFloat32);
  }
  st.found_inf = found_inf;
  st.stage = OptState::kUnscaled;
}

void GradScaler::record_found_inf(const optim::Optimizer& optimizer, const Tensor& found_inf) {
  if (!enabled_) return;
  check_initialised("record_found_inf");
  MANTISSA_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32,
                 kWhere, "record_found_inf needs a one-element float32 tensor");
  PerOptimizer& st = per_optimizer_[&optimizer];
  if (st.stage == OptState::kStepped)
    fail(kWhere, "record_found_inf() is being called after step().");
  st.found_inf = found_inf;
  st.stage = OptState::kUnscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_initialised("step");
  if (per_optimizer_[&optimizer].stage == OptState::kStepped)
    fail(kWhere, "step() has already been called since the last update().");
  if (per_optimizer_[&optimizer].stage == OptState::kReady) unscale_(optimizer);
  PerOptimizer& st = per_optimizer_[&optimizer];
  MANTISSA_CHECK(st.found_inf.defined(), kWhere, "No inf checks were recorded for this optimizer.");
  // The one place the scaler reads a device value back (a host sync on a GPU). A GPU flag is
  // then replaced by its host copy, so update() reads no device memory again.
  const double flag = st.found_inf.item();
  if (st.found_inf.is_cuda()) st.found_inf = scalar_tensor(flag, kFloat32);
  const bool found = flag != 0.0;
  if (found) {
    ++skipped_steps_;
  } else {
    optimizer.step_with_finite_grads();  // unscale_ has just checked every gradient
  }
  st.stage = OptState::kStepped;
  return !found;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialised("update");
  // Sum every optimizer's found_inf: any inf/NaN anywhere backs off the shared scale.
  Tensor total;
  for (const auto& [opt, st] : per_optimizer_) {
    if (!st.found_inf.defined()) continue;
    if (!total.defined()) {
      // Accumulated in place, as PyTorch does (on a host copy when unscale_ left it on a GPU
      // and no step() read it).
      total = st.found_inf.is_cuda() ? st.found_inf.to(kCPU) : st.found_inf;
    } else {
      float& acc = *static_cast<float*>(total.data_ptr());
      acc += static_cast<float>(st.found_inf.item());
    }
  }
  MANTISSA_CHECK(total.defined(), kWhere, "No inf checks were recorded prior to update.");
  update_scale_(scale_, growth_tracker_, total, growth_factor_, backoff_factor_, growth_interval_);
  // mantissa extension: keep the scale inside the optional bounds.
  float& s = *static_cast<float*>(scale_.data_ptr());
  if (min_scale_ && s < *min_scale_) s = static_cast<float>(*min_scale_);
  if (max_scale_ && s > *max_scale_) s = static_cast<float>(*max_scale_);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_initialised("update");
  check_scale(new_scale, "new_scale");  // what load_state_dict would refuse to read back
  mantissa::detail::fill_unchecked(scale_, new_scale);
  per_optimizer_.clear();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return;
  check_initialised("update");
  MANTISSA_CHECK(new_scale.defined(), kWhere, "new_scale is an undefined tensor");
  MANTISSA_CHECK(new_scale.device().type == scale_.device().type && new_scale.numel() == 1 &&
                     !new_scale.requires_grad(),
                 kWhere,
                 "new_scale should be a float or a 1-element tensor on the scaler's device with "
                 "requires_grad=False (got shape {}, device {}, requires_grad {})",
                 shape_str(new_scale.shape()), new_scale.device().str(), new_scale.requires_grad());
  check_scale(new_scale.item(), "new_scale");
  mantissa::detail::copy_unchecked(scale_, new_scale.reshape({}));
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item() : init_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? static_cast<int64_t>(growth_tracker_.item())
                                   : init_growth_tracker_;
}

OptState GradScaler::stage(const optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? OptState::kReady : it->second.stage;
}

Tensor GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? Tensor() : it->second.found_inf;
}

nlohmann::json GradScaler::state_dict() const {
  if (!enabled_) return nlohmann::json::object();
  return {{"scale", get_scale()},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", growth_interval_},
          {"_growth_tracker", get_growth_tracker()}};
}

void GradScaler::load_state_dict(const nlohmann::json& state) {
  if (!enabled_) return;
  MANTISSA_CHECK(state.is_object(), kWhere, "state dict must be a JSON object, got {}",
                 state.type_name());
  MANTISSA_CHECK(!state.empty(), kWhere,
                 "The source state dict is empty, possibly because it was saved from a disabled "
                 "instance of GradScaler.");
  auto number = [&](const char* key, bool integer) {
    auto it = state.find(key);
    MANTISSA_CHECK(it != state.end(), kWhere, "state dict has no key '{}'", key);
    MANTISSA_CHECK(integer ? it->is_number_integer() : it->is_number(), kWhere,
                   "state dict key '{}' must be {}, got {}", key,
                   integer ? "an integer" : "a number", io::json_excerpt(*it));
    return *it;
  };
  // Read everything before assigning anything, so a bad dict leaves the scaler unchanged.
  const double scale = number("scale", false).get<double>();
  const double growth = number("growth_factor", false).get<double>();
  const double backoff = number("backoff_factor", false).get<double>();
  const int64_t interval = number("growth_interval", true).get<int64_t>();
  const int64_t tracker = number("_growth_tracker", true).get<int64_t>();
  // The same ranges the constructor enforces: a state dict read from a file is untrusted.
  auto in_range = [&](bool ok, const char* key, const char* range) {
    MANTISSA_CHECK(ok, kWhere, "state dict key '{}' must be {}, got {}", key, range,
                   io::json_excerpt(state.at(key)));
  };
  in_range(std::isfinite(scale) && scale > 0, "scale", "a finite number > 0");
  in_range(std::isfinite(growth) && growth > 1, "growth_factor", "a finite number > 1");
  in_range(backoff > 0 && backoff < 1, "backoff_factor", "a number in (0, 1)");
  // growth_interval <= 0 is a documented setting (the scale never grows), and a tracker at or
  // past the interval is reachable (it counts on forever there, or after set_growth_interval
  // lowered the interval): both are what state_dict() writes, so both load, as in PyTorch.
  // The tracker is an int32 tensor (PyTorch's too).
  in_range(tracker >= 0 && tracker <= std::numeric_limits<int32_t>::max(), "_growth_tracker",
           "an integer in [0, 2147483647]");
  init_scale_ = scale;
  if (scale_.defined()) mantissa::detail::fill_unchecked(scale_, scale);
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = interval;
  init_growth_tracker_ = tracker;
  if (growth_tracker_.defined())
    mantissa::detail::fill_unchecked(growth_tracker_, static_cast<double>(tracker));
}

}  // namespace mantissa::amp
