// Optimizer base: parameter bookkeeping, zero_grad and the state dict.
#include "mantissa/optim/optimizer.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/untrusted_text.h"
#include "optim/loaded_state.h"

namespace mantissa::optim {

void check_hyper(bool ok, const char* where, const char* what, double value) {
  if (!ok) fail(where, "Invalid {}: {}", what, value);
}

void check_half_precision(const HalfPrecisionOptions& h, const char* where) {
  // With a master copy the parameter is only a rounded view of it: rounding that view
  // stochastically would add noise without keeping any information the master lacks.
  MANTISSA_CHECK(!(h.master_weights && h.stochastic_rounding), where,
                 "master_weights and stochastic_rounding exclude each other: with master "
                 "weights the half parameter is the round-to-nearest copy of the fp32 master");
}

namespace {
bool is_half(const Tensor& p) { return p.dtype() == kFloat16 || p.dtype() == kBFloat16; }

Tensor fp32_copy(const Tensor& p) {
  Tensor m = empty(p.shape(), kFloat32, p.device());
  mantissa::detail::copy_unchecked(m, p.detach());
  return m;
}
}  // namespace

void Optimizer::add_params(std::vector<Tensor> params) {
  const char* where = "Optimizer";
  MANTISSA_CHECK(!params.empty(), where, "optimizer got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (const auto& group : groups_)
    for (const auto& p : group) seen.insert(p.impl_ptr().get());
  std::set<const TensorImpl*> mine;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    MANTISSA_CHECK(p.defined(), where, "parameter {} is an undefined tensor", i);
    MANTISSA_CHECK(p.is_leaf(), where, "can't optimize a non-leaf Tensor (parameter {})", i);
    // Complex parameters are admitted here; SGD steps them (docs/complex.md), the other
    // optimizers refuse them in their update loops.
    MANTISSA_CHECK(p.dtype() == kFloat64 || p.dtype() == kFloat32 || p.dtype() == kFloat16 ||
                       p.dtype() == kBFloat16 || p.dtype().is_complex(),
                   where,
                   "parameter {} has dtype {}; optimizers update float64, float32, float16 or "
                   "bfloat16 parameters (and complex ones with SGD)",
                   i, p.dtype().name());
    // The update loops walk the parameter's memory directly.
    MANTISSA_CHECK(p.is_contiguous(), where, "parameter {} (shape {}) is not contiguous", i,
                   shape_str(p.shape()));
    MANTISSA_CHECK(!seen.count(p.impl_ptr().get()), where,
                   "some parameters appear in more than one parameter group");
    MANTISSA_CHECK(mine.insert(p.impl_ptr().get()).second, where,
                   "parameter {} appears twice in the same parameter group", i);
  }
  state_.emplace_back(params.size());
  groups_.push_back(std::move(params));
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  MANTISSA_CHECK(group < groups_.size(), "Optimizer", "param group {} out of range ({} groups)",
                 group, groups_.size());
  return groups_[group];
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const auto& g : groups_) all.insert(all.end(), g.begin(), g.end());
  return all;
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g) p.reset_grad();
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

const ParamState* Optimizer::state(const Tensor& param) const {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      if (groups_[g][i].is_same(param)) return &state_[g][i];
  return nullptr;
}

void Optimizer::init_half_state(size_t group) {
  for (size_t i = 0; i < groups_[group].size(); ++i) {
    const Tensor& p = groups_[group][i];
    if (uses_master(group, p)) state_[group][i].buffers["master_param"] = fp32_copy(p);
  }
}

ParamState& Optimizer::state_for_update(size_t group, size_t index) {
  ParamState& st = state_[group][index];
  const Tensor& p = groups_[group][index];
  const bool has_master = st.buffers.count("master_param") != 0;
  if (uses_master(group, p) && !has_master) st.buffers["master_param"] = fp32_copy(p);
  if (!uses_master(group, p) && has_master) st.buffers.erase("master_param");
  return st;
}

Tensor& Optimizer::state_buffer(ParamState& st, const std::string& name, const Shape& shape,
                                DType dtype, Device device) {
  auto it = st.buffers.find(name);
  if (it == st.buffers.end())
    return st.buffers.emplace(name, zeros(shape, dtype, device)).first->second;
  Tensor& b = it->second;
  if (b.dtype() != dtype || b.device() != device) {
    NoGradGuard guard;
    Tensor moved = empty(shape, dtype, device);
    mantissa::detail::copy_unchecked(moved, b);
    b = moved;
  }
  return b;
}

bool Optimizer::uses_master(size_t group, const Tensor& param) const {
  return is_half(param) && half_precision(group).master_weights;
}

DType Optimizer::state_dtype(size_t group, const Tensor& param) const {
  if (!is_half(param)) return param.dtype();
  const HalfPrecisionOptions h = half_precision(group);
  return h.master_weights || h.fp32_state ? kFloat32 : param.dtype();
}

int64_t Optimizer::param_index(size_t group, size_t index) const {
  int64_t before = 0;
  for (size_t g = 0; g < group; ++g) before += static_cast<int64_t>(groups_[g].size());
  return before + static_cast<int64_t>(index);
}

Tensor Optimizer::grad_for_update(const Tensor& param, const char* where) {
  Tensor g = param.grad();
  if (!g.defined()) return g;
  MANTISSA_CHECK(g.shape() == param.shape(), where,
                 "gradient shape {} differs from parameter shape {}", shape_str(g.shape()),
                 shape_str(param.shape()));
  MANTISSA_CHECK(g.dtype() == param.dtype(), where,
                 "gradient dtype {} differs from parameter dtype {}", g.dtype().name(),
                 param.dtype().name());
  if (!g.is_contiguous()) {
    NoGradGuard guard;
    g = g.contiguous();
  }
  return g;
}

std::vector<std::vector<Tensor>> Optimizer::checked_grads(const char* where) const {
  std::vector<std::vector<Tensor>> grads(num_param_groups());
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (const Tensor& p : params(gi)) grads[gi].push_back(grad_for_update(p, where));
  return grads;
}

Tensor Optimizer::loaded_buffer(size_t group, size_t index, const std::string& buffer,
                                const Tensor& saved, const std::string& key) const {
  const Tensor& p = groups_[group][index];
  MANTISSA_CHECK(saved.defined() && saved.shape() == p.shape(), "Optimizer::load_state_dict",
                 "tensor {} has shape {}, parameter {} has shape {}", quote_untrusted(key),
                 saved.defined() ? shape_str(saved.shape()) : "undefined",
                 param_index(group, index), shape_str(p.shape()));
  // Floating state of another width is converted, as PyTorch casts it to the parameter's dtype;
  // integers or bools were converted too, value by value, and trained on silently.
  MANTISSA_CHECK(saved.dtype().is_floating_point() || saved.dtype().is_complex(),
                 "Optimizer::load_state_dict",
                 "tensor {} has dtype {}; optimizer state is floating point (the file is damaged "
                 "or not a checkpoint of this model)",
                 quote_untrusted(key), saved.dtype().name());
  // On the parameter's device: a state saved from (or loaded to) the CPU moves here.
  detail::check_loaded_state_values(saved.detach(), key, "Optimizer::load_state_dict",
                                    detail::non_negative_state(buffer));
  Tensor copy =
      empty(p.shape(), buffer == "master_param" ? kFloat32 : state_dtype(group, p), p.device());
  mantissa::detail::copy_unchecked(copy, saved.detach());
  return copy;
}

int64_t Optimizer::state_bytes() const {
  int64_t total = 0;
  for (const auto& group : state_)
    for (const ParamState& s : group)
      for (const auto& [name, t] : s.buffers) total += static_cast<int64_t>(t.nbytes());
  return total;
}

void Optimizer::release_state(const Tensor& param) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      if (groups_[g][i].is_same(param)) state_[g][i] = ParamState{};
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.meta["optimizer"] = std::string(name());
  nlohmann::json groups = nlohmann::json::array();
  nlohmann::json states = nlohmann::json::object();
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    nlohmann::json group = group_options_json(g);
    nlohmann::json ids = nlohmann::json::array();
    for (size_t i = 0; i < groups_[g].size(); ++i, ++index) {
      ids.push_back(index);
      const ParamState& s = state_[g][i];
      if (s.empty()) continue;
      states[std::to_string(index)] = {{"step", s.step}};
      // State on a GPU is copied to the CPU (checkpoints write host memory); CPU state is
      // aliased as before.
      for (const auto& [buf_name, t] : s.buffers)
        out.tensors["state." + std::to_string(index) + "." + buf_name] =
            t.is_cuda() ? t.to(kCPU) : t;
    }
    group["params"] = std::move(ids);
    groups.push_back(std::move(group));
  }
  out.meta["param_groups"] = std::move(groups);
  out.meta["state"] = std::move(states);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& sd) {
  const char* where = "Optimizer::load_state_dict";
  // Malformed JSON fields and indices surface as mantissa::Error like every other failure.
  try {
    load_state_dict_checked(sd);
  } catch (const nlohmann::json::exception& e) {
    fail(where, "malformed state dict: {}", e.what());
  } catch (const std::logic_error& e) {
    fail(where, "malformed state dict: {}", e.what());
  }
}

void Optimizer::load_state_dict_checked(const OptimizerState& sd) {
  const char* where = "Optimizer::load_state_dict";
  const auto& meta = sd.meta;
  MANTISSA_CHECK(meta.is_object() && meta.contains("optimizer") && meta.contains("param_groups"),
                 where, "state dict lacks the \"optimizer\" or \"param_groups\" field");
  const std::string kind = meta.at("optimizer").get<std::string>();
  MANTISSA_CHECK(kind == name(), where, "state dict is for {}, this optimizer is {}", kind, name());
  const auto& groups = meta.at("param_groups");
  MANTISSA_CHECK(groups.is_array() && groups.size() == groups_.size(), where,
                 "loaded state dict has {} parameter groups, this optimizer has {}",
                 groups.is_array() ? groups.size() : 0, groups_.size());

  // Saved parameter ids map to this optimizer's parameters by position within their group
  // (as in PyTorch), so the ids themselves may be any distinct numbers.
  std::map<int64_t, std::pair<size_t, size_t>> where_is;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& ids = groups[g].at("params");
    MANTISSA_CHECK(ids.is_array() && ids.size() == groups_[g].size(), where,
                   "loaded parameter group {} has {} parameters, this optimizer's has {}", g,
                   ids.is_array() ? ids.size() : 0, groups_[g].size());
    for (size_t i = 0; i < groups_[g].size(); ++i)
      MANTISSA_CHECK(where_is.emplace(ids[i].get<int64_t>(), std::make_pair(g, i)).second, where,
                     "parameter id {} appears twice in the loaded param_groups",
                     ids[i].get<int64_t>());
  }
  auto locate = [&](int64_t id, const std::string& what) {
    auto it = where_is.find(id);
    MANTISSA_CHECK(it != where_is.end(), where,
                   "{} names parameter id {}, which no loaded "
                   "param_group lists",
                   what, id);
    return it->second;
  };

  // Build the new state fully before touching this optimizer, so a bad dict changes nothing.
  std::vector<std::vector<ParamState>> fresh(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) fresh[g].resize(groups_[g].size());
  const nlohmann::json states = meta.value("state", nlohmann::json::object());
  for (const auto& [key, entry] : states.items()) {
    const int64_t idx = std::stoll(key);
    auto [g, i] = locate(idx, "state entry " + quote_untrusted(key));
    const int64_t step = entry.value("step", int64_t{0});
    MANTISSA_CHECK(step >= 0, where, "parameter {} has a negative step count {}", idx, step);
    fresh[g][i].step = step;
  }
  for (const auto& [key, t] : sd.tensors) {
    // "state.<index>.<buffer>"
    const auto dot = key.find('.', 6);
    MANTISSA_CHECK(key.rfind("state.", 0) == 0 && dot != std::string::npos, where,
                   "unexpected tensor name {} (expected state.<index>.<buffer>)",
                   quote_untrusted(key));
    const int64_t idx = std::stoll(key.substr(6, dot - 6));
    auto [g, i] = locate(idx, "tensor " + quote_untrusted(key));
    const Tensor& p = groups_[g][i];
    const std::string buf = key.substr(dot + 1);
    // A saved master is kept only where this optimizer uses one; elsewhere the parameter
    // already holds its rounding.
    if (buf == "master_param" && !uses_master(g, p)) continue;
    fresh[g][i].buffers[buf] = loaded_buffer(g, i, buf, t, key);
  }
  // Master weights missing from the dict (saved without them) start from the parameter.
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      if (uses_master(g, groups_[g][i]) && !fresh[g][i].buffers.count("master_param"))
        fresh[g][i].buffers["master_param"] = fp32_copy(groups_[g][i]);

  // Options first (they decide which buffers a group needs), restoring them on failure.
  std::vector<nlohmann::json> old_options;
  for (size_t g = 0; g < groups_.size(); ++g) old_options.push_back(group_options_json(g));
  try {
    for (size_t g = 0; g < groups_.size(); ++g) {
      nlohmann::json o = groups[g];
      o.erase("params");
      set_group_options_json(g, o);
    }
    for (size_t g = 0; g < groups_.size(); ++g)
      for (size_t i = 0; i < groups_[g].size(); ++i) check_loaded_state(g, fresh[g][i]);
  } catch (...) {
    for (size_t g = 0; g < groups_.size(); ++g) set_group_options_json(g, old_options[g]);
    throw;
  }
  state_ = std::move(fresh);
}

}  // namespace mantissa::optim
