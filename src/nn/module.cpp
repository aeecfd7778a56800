#include "mantissa/nn/module.h"

#include "mantissa/core/managed_precision.h"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <unordered_set>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/nn/module_hooks.h"

namespace mantissa::nn {

// ---- StateDict ----

void StateDict::insert(const std::string& key, Tensor value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(value));
}

const Tensor& StateDict::at(const std::string& key) const {
  auto it = index_.find(key);
  MANTISSA_CHECK(it != index_.end(), "StateDict", "no entry named \"{}\"", key);
  return items_[it->second].second;
}

void StateDict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  k.reserve(items_.size());
  for (const auto& [name, t] : items_) k.push_back(name);
  return k;
}

// ---- registration ----

Tensor Module::forward(const Tensor&) {
  // Reached through a TrainModule's default predict_step too: say both ways out.
  fail("Module::forward",
       "{} does not implement forward(const Tensor&): override it (a TrainModule's default "
       "predict_step calls it), or override predict_step",
       name_);
}

Tensor Module::register_serialized_buffer(const std::string& name, Tensor tensor, bool host) {
  MANTISSA_CHECK(!name.empty() && name.front() != '.' && name.back() != '.', "register_buffer",
                 "invalid name \"{}\" in {}", name, name_);
  for (const auto& [n, t] : buffers_)
    MANTISSA_CHECK(n != name, "register_buffer", "buffer \"{}\" already exists in {}", name, name_);
  MANTISSA_CHECK(tensor.defined(), "register_buffer", "buffer \"{}\" is undefined", name);
  MANTISSA_CHECK(!host || tensor.device().is_cpu(), "register_buffer",
                 "host buffer \"{}\" must be in CPU memory, got {}", name, tensor.device().str());
  buffers_.emplace_back(name, tensor);
  keep_dtype_buffers_.push_back(name);
  if (host) host_buffers_.push_back(name);
  return tensor;
}

void Module::check_new_name(const std::string& name, const char* what) const {
  MANTISSA_CHECK(!name.empty() && name.find('.') == std::string::npos, what,
                 "invalid name \"{}\" in {}: names must be non-empty and contain no '.'", name,
                 name_);
  auto taken = [&](const auto& list) {
    for (const auto& [n, v] : list)
      if (n == name) return true;
    return false;
  };
  MANTISSA_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), what,
                 "\"{}\" is already registered in {}", name, name_);
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "register_parameter");
  MANTISSA_CHECK(tensor.defined(), "register_parameter", "parameter \"{}\" is undefined", name);
  MANTISSA_CHECK(tensor.is_leaf(), "register_parameter",
                 "parameter \"{}\" must be a leaf tensor (it has a grad_fn); detach() it first",
                 name);
  MANTISSA_CHECK(
      !requires_grad || tensor.is_floating_point() || tensor.dtype().is_complex(),
      "register_parameter",
      "parameter \"{}\" has dtype {}; only floating and complex tensors can require gradients",
      name, tensor.dtype().name());
  tensor.requires_grad_(requires_grad);
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool keep_dtype) {
  check_new_name(name, "register_buffer");
  MANTISSA_CHECK(tensor.defined(), "register_buffer", "buffer \"{}\" is undefined", name);
  buffers_.emplace_back(name, tensor);
  if (keep_dtype) keep_dtype_buffers_.push_back(name);
  return tensor;
}

Tensor Module::register_host_buffer(const std::string& name, Tensor tensor) {
  MANTISSA_CHECK(tensor.defined() && tensor.device().is_cpu(), "register_host_buffer",
                 "buffer \"{}\" must be a CPU tensor", name);
  register_buffer(name, tensor, /*keep_dtype=*/true);
  host_buffers_.push_back(name);
  return tensor;
}

namespace {
// Whether `target` is `root` or one of its descendants. The walk keeps a visited set: a module
// held in several slots is looked at once.
bool reaches(const Module& root, const Module* target) {
  std::unordered_set<const Module*> seen;
  std::vector<const Module*> stack{&root};
  while (!stack.empty()) {
    const Module* m = stack.back();
    stack.pop_back();
    if (m == target) return true;
    if (!seen.insert(m).second) continue;
    for (const auto& [n, child] : m->named_children()) stack.push_back(child.get());
  }
  return false;
}

// A module registered inside itself, directly or through its children, would make every walk of
// the tree (parameters(), state_dict(), to()) recurse without end.
void check_no_cycle(const Module& parent, const std::string& name, const Module& child,
                    const char* op) {
  MANTISSA_CHECK(!reaches(child, &parent), op,
                 "module \"{}\" ({}) {} the {} it is being registered in: a module cannot be "
                 "its own descendant (parameters(), state_dict() and to() would never end)",
                 name, child.name(), &child == &parent ? "is" : "contains", parent.name());
}
}  // namespace

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  MANTISSA_CHECK(module != nullptr, "register_module", "module \"{}\" is null", name);
  check_no_cycle(*this, name, *module, "register_module");
  children_.emplace_back(name, std::move(module));
  detail::notify_child_registered(*this, name);
}

// ---- traversal ----

void Module::collect(const std::string& prefix, bool params, bool buffers, bool recurse,
                     NamedTensors& out) const {
  if (params)
    for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_)
    child->collect(prefix + n + ".", params, buffers, true, out);
}

namespace {
// Keeps the first name of each tensor: a tensor registered twice (a tied weight, a module in two
// slots) is one parameter, as PyTorch's named_parameters(remove_duplicate=True) has it, so an
// optimizer gets it once (it refused the list: "parameter 1 appears twice in the same
// parameter group"), parameter_count() counts it once and clipping sees its gradient once.
// state_dict() keeps every name, as PyTorch's does.
Module::NamedTensors without_duplicates(Module::NamedTensors all) {
  std::unordered_set<const TensorImpl*> seen;
  Module::NamedTensors out;
  out.reserve(all.size());
  for (auto& [name, t] : all)
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(std::move(name), std::move(t));
  return out;
}
}  // namespace

Module::NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", true, false, recurse, out);
  return without_duplicates(std::move(out));
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

Module::NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, true, recurse, out);
  return without_duplicates(std::move(out));
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

Module::NamedModules Module::named_children() const {
  // A module in two slots is one child (PyTorch's children memo): the walks built on this
  // (model summary, parameter counts, layer replacement) would count or convert it twice.
  std::unordered_set<const Module*> seen;
  NamedModules out;
  for (const auto& [n, c] : children_)
    if (seen.insert(c.get()).second) out.emplace_back(n, c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : named_children()) out.push_back(c);
  return out;
}

namespace {
void apply_once(Module& m, const std::function<void(Module&)>& fn,
                std::unordered_set<const Module*>& seen) {
  if (!seen.insert(&m).second) return;
  fn(m);
  // The slots are read after fn ran: fn may have replaced a child.
  for (const auto& [n, c] : m.child_slots()) apply_once(*c, fn, seen);
}

template <typename M, typename Out>
void collect_modules(M& m, const std::string& prefix, Out& out,
                     std::unordered_set<const Module*>* seen) {
  // A shared module keeps its first name, and its subtree is listed under that name only;
  // without `seen` (remove_duplicate false) it is listed under every path.
  if (seen != nullptr && !seen->insert(&m).second) return;
  out.emplace_back(prefix, &m);
  for (const auto& [n, c] : m.child_slots())
    collect_modules(static_cast<M&>(*c), prefix.empty() ? n : prefix + "." + n, out, seen);
}
}  // namespace

void Module::apply(const std::function<void(Module&)>& fn) {
  std::unordered_set<const Module*> seen;
  apply_once(*this, fn, seen);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules(bool remove_duplicate) {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> seen;
  collect_modules(*this, "", out, remove_duplicate ? &seen : nullptr);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules(
    bool remove_duplicate) const {
  std::vector<std::pair<std::string, const Module*>> out;
  std::unordered_set<const Module*> seen;
  collect_modules(*this, "", out, remove_duplicate ? &seen : nullptr);
  return out;
}

std::string Module::child_names() const {
  if (children_.empty()) return "it has no children";
  std::string s = "its children are";
  for (size_t i = 0; i < children_.size(); ++i)
    s += (i ? ", \"" : " \"") + children_[i].first + "\"";
  return s;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& [n, c] : children_)
    if (n == name) return c;
  fail("Module::child", "{} has no child module \"{}\"; {}", name_, name, child_names());
}

void Module::throw_wrong_child_type(const std::string& name, const Module& found) const {
  fail("Module::child_as",
       "child \"{}\" of {} is a {}, not the type this code expects (was it "
       "replaced by replace_child or replace_modules?)",
       name, name_, found.name());
}

const Module& Module::get_submodule(const std::string& qualified_name) const {
  const Module* m = this;
  std::string path;  // the part already resolved, for the error message
  size_t start = 0;
  while (!qualified_name.empty() && start <= qualified_name.size()) {
    const size_t dot = std::min(qualified_name.find('.', start), qualified_name.size());
    const std::string part = qualified_name.substr(start, dot - start);
    const Module* next = nullptr;
    for (const auto& [n, c] : m->children_)
      if (n == part) next = c.get();
    if (next == nullptr) {
      const std::string where = path.empty() ? m->name_ : "\"" + path + "\" (" + m->name_ + ")";
      fail("Module::get_submodule", "no module \"{}\" in {}: {} has no child \"{}\"; {}",
           qualified_name, name_, where, part, m->child_names());
    }
    path += (path.empty() ? "" : ".") + part;
    m = next;
    start = dot + 1;
  }
  return *m;
}

Module& Module::get_submodule(const std::string& qualified_name) {
  return const_cast<Module&>(std::as_const(*this).get_submodule(qualified_name));
}

std::shared_ptr<Module> Module::replace_child(const std::string& name,
                                              std::shared_ptr<Module> module) {
  MANTISSA_CHECK(module != nullptr, "Module::replace_child", "the new module for \"{}\" is null",
                 name);
  check_no_cycle(*this, name, *module, "Module::replace_child");
  for (auto& [n, c] : children_) {
    if (n != name) continue;
    std::shared_ptr<Module> old = std::move(c);
    c = std::move(module);
    return old;
  }
  fail("Module::replace_child", "{} has no child module \"{}\" to replace; {}", name_, name,
       child_names());
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

// ---- modes, dtype, gradients ----

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

namespace {
// Replaces t's contents with a converted copy while keeping the TensorImpl (and so every
// handle to it). A gradient is converted too, so it keeps matching its parameter.
void convert_in_place(const Tensor& t, DType dtype) {
  if (!t.is_floating_point() || t.dtype() == dtype) return;
  const Tensor c = t.detach().to(dtype);
  TensorImpl& impl = t.impl();
  impl.storage = c.storage();
  impl.offset = c.offset();
  impl.strides = c.strides();
  impl.dtype = dtype;
  if (impl.grad && impl.grad->dtype != dtype)
    impl.grad = Tensor(impl.grad).detach().to(dtype).impl_ptr();
}

// The same for a device: every tensor (floating or not: buffers hold counts and indices) moves.
void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  const Tensor c = t.detach().to(device);
  TensorImpl& impl = t.impl();
  impl.storage = c.storage();
  impl.offset = c.offset();
  impl.strides = c.strides();
  impl.device = device;
  if (impl.grad && impl.grad->device != device)
    impl.grad = Tensor(impl.grad).detach().to(device).impl_ptr();
}
}  // namespace

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  for (const auto& [n, t] : named_parameters()) move_in_place(t, device);
  apply([device](Module& m) {
    const auto& host = m.host_buffers_;
    for (const auto& [n, t] : m.buffers_)
      if (std::find(host.begin(), host.end(), n) == host.end()) move_in_place(t, device);
  });
  return *this;
}

Module& Module::to(DType dtype) {
  MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "Module::to",
                 "expected a floating dtype (float64, float32, float16, bfloat16), got {}; "
                 "float8 weights need scales (see the fp8 modules)",
                 dtype.name());
  if (managed_precision() != nullptr) {
    warn_if_cast_by_hand("module cast", fmt::format("Module::to({}) of {} was called by hand",
                                                    dtype.name(), name()));
  }
  NoGradGuard no_grad;
  for (const auto& [n, t] : named_parameters()) convert_in_place(t, dtype);
  apply([dtype](Module& m) {
    for (const auto& [n, t] : m.buffers_) {
      const auto& keep = m.keep_dtype_buffers_;
      if (std::find(keep.begin(), keep.end(), n) == keep.end()) convert_in_place(t, dtype);
    }
  });
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.reset_grad();
}

// ---- state dict ----

StateDict Module::state_dict() const {
  NamedTensors all;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    m.collect(prefix, true, true, false, all);
    for (const auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, "");
  StateDict sd;
  for (auto& [n, t] : all) sd.insert(n, t.detach());
  return sd;
}

namespace {
// What a state-dict value may be converted between: floating dtypes into each other, integer
// widths into each other, bool and complex only into themselves.
const char* dtype_kind(DType d) {
  if (d.is_complex()) return "complex";
  if (d.is_floating_point()) return "floating";
  if (d.is_bool()) return "bool";
  return "integer";
}

// Keys may come from a file: escaped (no terminal escape sequences), and at most 20 listed.
std::string quoted_list(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 20;
  std::string s;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i)
    s += (i ? ", \"" : "\"") + escape_untrusted(keys[i]) + "\"";
  if (keys.size() > kShown) s += fmt::format(", ... ({} in all)", keys.size());
  return s;
}

// The first key of `keys` that contains `piece`, or "".
std::string first_with(const std::vector<std::string>& keys, const std::string& piece) {
  for (const std::string& k : keys)
    if (k.find(piece) != std::string::npos) return k;
  return {};
}

// What the keys that did not line up say about the two sides, when they come from one of the
// conversions the precision plugins and LoRA make (the tensor names alone said "missing" and
// "unexpected", not which step of the user's own flow was left out).
std::vector<std::string> conversion_hints(const std::vector<std::string>& missing,
                                          const std::vector<std::string>& unexpected) {
  std::vector<std::string> hints;
  if (std::string k = first_with(unexpected, ".quant_state.bitsandbytes__"); !k.empty()) {
    const std::string format = k.substr(k.rfind("__") + 2);
    hints.push_back(fmt::format(
        "the state dict holds 4-bit ({}) quantized weights (\"{}\"), the module full-precision "
        "ones: quantize the module in the mode the file was saved in first "
        "(train::BitsandbytesPrecision(\"{}\" or \"{}-dq\").convert_module, docs/qlora.md), "
        "then load",
        format, escape_untrusted(k), format, format));
  } else if (std::string k8 = first_with(unexpected, ".SCB"); !k8.empty()) {
    hints.push_back(fmt::format(
        "the state dict holds LLM.int8 quantized weights (\"{}\"), the module full-precision "
        "ones: quantize the module first (train::BitsandbytesPrecision(\"int8\").convert_module, "
        "docs/qlora.md), then load",
        escape_untrusted(k8)));
  }
  const std::string lora_in = first_with(unexpected, ".lora_A.");
  const std::string lora_own = first_with(missing, ".lora_A.");
  if (!lora_in.empty() && lora_own.empty()) {
    hints.push_back(fmt::format(
        "the state dict holds LoRA adapters (\"{}\"), the module has none: apply "
        "nn::apply_lora with the rank and targets the file was saved with first, then load",
        escape_untrusted(lora_in)));
  } else if (lora_in.empty() && !lora_own.empty()) {
    hints.push_back(fmt::format(
        "the module has LoRA adapters (\"{}\"), the state dict none: load the base weights "
        "before nn::apply_lora (its layers then move under \"base_layer\"), or load "
        "with strict=false",
        lora_own));
  }
  if (std::string k = first_with(unexpected, ".fp8_");
      !k.empty() && first_with(missing, ".fp8_").empty()) {
    hints.push_back(fmt::format(
        "the state dict holds FP8 scaling state (\"{}\"), the module has no FP8 layers: "
        "convert it with train::TransformerEnginePrecision first, or load with strict=false to "
        "take the weights alone (docs/fp8.md)",
        escape_untrusted(k)));
  } else if (std::string own = first_with(missing, ".fp8_");
             !own.empty() && first_with(unexpected, ".fp8_").empty()) {
    hints.push_back(fmt::format(
        "the module has FP8 layers (\"{}\"), the state dict no FP8 scaling state: load it "
        "before converting the module, or with strict=false (the scales start afresh, "
        "docs/fp8.md)",
        own));
  }
  return hints;
}
}  // namespace

StateDict Module::upgrade_legacy_keys(const StateDict& state) const {
  StateDict upgraded = state;  // tensor handles: a cheap copy the layers may rename keys in
  std::function<void(const Module&, const std::string&)> upgrade = [&](const Module& m,
                                                                       const std::string& prefix) {
    m.upgrade_state_dict(prefix, upgraded);
    for (const auto& [n, c] : m.children_) upgrade(*c, prefix + n + ".");
  };
  upgrade(*this, "");
  return upgraded;
}

LoadResult Module::load_state_dict(const StateDict& incoming, bool strict) {
  const StateDict state = upgrade_legacy_keys(incoming);
  std::function<void(Module&, const std::string&)> prepare = [&](Module& m,
                                                                 const std::string& prefix) {
    m.prepare_load_state_dict(prefix, state);
    for (const auto& [n, c] : m.children_) prepare(*c, prefix + n + ".");
  };
  prepare(*this, "");
  StateDict own = state_dict();
  LoadResult result;
  std::vector<std::string> problems;
  for (const auto& [k, t] : own) {
    if (!state.contains(k)) {
      result.missing_keys.push_back(k);
      continue;
    }
    const Tensor& src = state.at(k);
    if (!src.defined()) {
      problems.push_back(fmt::format("\"{}\" is an undefined tensor", k));
    } else if (src.shape() != t.shape()) {
      problems.push_back(
          fmt::format("size mismatch for \"{}\": checkpoint has shape {}, the "
                      "module has {}",
                      k, shape_str(src.shape()), shape_str(t.shape())));
    } else if (dtype_kind(src.dtype()) != dtype_kind(t.dtype())) {
      // Floating dtypes convert into each other (a bf16 checkpoint into an fp32 model); an
      // integer or bool tensor into a floating parameter (or back) is a corrupt or foreign
      // file, whose bytes would load as garbage values.
      problems.push_back(fmt::format(
          "dtype mismatch for \"{}\": checkpoint has {}, the module has {} ({} values cannot "
          "be loaded into {} {} tensor)",
          k, src.dtype().name(), t.dtype().name(), dtype_kind(src.dtype()),
          dtype_kind(t.dtype())[0] == 'i' ? "an" : "a", dtype_kind(t.dtype())));
    }
  }
  for (const auto& [k, t] : state)
    if (!own.contains(k)) result.unexpected_keys.push_back(k);
  if (strict && !result.missing_keys.empty())
    problems.push_back("missing keys: " + quoted_list(result.missing_keys));
  if (strict && !result.unexpected_keys.empty())
    problems.push_back("unexpected keys: " + quoted_list(result.unexpected_keys));
  if (!problems.empty()) {
    std::string msg;
    for (const auto& p : problems) msg += "\n  " + p;
    for (const auto& h : conversion_hints(result.missing_keys, result.unexpected_keys))
      msg += "\n  hint: " + h;
    fail("load_state_dict", "error(s) loading state_dict into {}:{}", name_, msg);
  }
  NoGradGuard no_grad;
  for (const auto& [k, t] : own) {
    if (!state.contains(k)) continue;
    Tensor dst = t;
    mantissa::detail::copy_unchecked(dst, state.at(k));
  }
  return result;
}

// ---- printing ----

namespace {
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string line; std::getline(is, line);) out.push_back(line);
  return out;
}

// Indents every line but the first, so a nested module lines up under its "(name): " label.
std::string indent_tail(const std::string& s, int spaces) {
  const auto lines = split_lines(s);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n" + std::string(static_cast<size_t>(spaces), ' ');
    out += lines[i];
  }
  return out;
}
}  // namespace

std::string Module::to_string() const {
  const std::string extra = extra_repr();
  const std::vector<std::string> extra_lines =
      extra.empty() ? std::vector<std::string>{} : split_lines(extra);
  std::vector<std::string> lines = extra_lines;
  for (const auto& [n, c] : children_)
    lines.push_back("(" + n + "): " + indent_tail(c->to_string(), 2));
  std::string s = name_ + "(";
  if (extra_lines.size() == 1 && children_.empty()) {
    s += extra_lines[0];
  } else if (!lines.empty()) {
    for (const auto& l : lines) s += "\n  " + l;
    s += "\n";
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.to_string(); }

}  // namespace mantissa::nn
