#pragma once
// nn::Module: the base of every layer (PyTorch C++ frontend vocabulary, flashlight-sized).
// A module owns named parameters, buffers and child modules, all kept in registration order,
// so named_parameters() and state_dict() list "fc1.weight", "fc1.bias", "0.weight", ... the
// way PyTorch does.
//
// Children are slots: replace_child() puts another module in a slot without moving it, so
// names and state-dict order stay the same. Composite modules therefore call the module that
// is in the slot at forward time (child("fc1")->forward(x)), never a typed pointer captured at
// construction; see nn/replace.h for replacing every Linear of a model at once.
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::nn {

// Name -> tensor in insertion order (PyTorch's OrderedDict for state dicts).
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  // Adds key, or replaces its tensor keeping its position.
  void insert(const std::string& key, Tensor value);
  bool contains(const std::string& key) const { return index_.count(key) > 0; }
  // Throws naming the key when absent.
  const Tensor& at(const std::string& key) const;
  void erase(const std::string& key);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

// What load_state_dict(strict=false) skipped (PyTorch's _IncompatibleKeys).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
  using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  // Modules own their parameters: copying would silently alias them.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Single-input forward; layers override it. The base throws.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // The class name used when printing ("Linear", "Sequential").
  const std::string& name() const { return name_; }
  // Constructor arguments shown by the printer, e.g. "in_features=4, out_features=2, bias=true".
  virtual std::string extra_repr() const { return {}; }
  // PyTorch-style multi-line description of the module tree.
  std::string to_string() const;

  // Registers a leaf tensor as a parameter (requires_grad set, floating dtype required) and
  // returns the same handle. Names are unique per module and contain no '.'.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // State that is saved but not trained (running statistics, FP8 amax history). With
  // keep_dtype, Module::to leaves the buffer's dtype alone (batch norm's running statistics
  // stay fp32 in a bf16/fp16 model).
  Tensor register_buffer(const std::string& name, Tensor tensor, bool keep_dtype = false);
  // A buffer that host code reads and writes every step (the FP8 scales and amax history):
  // Module::to(Device) leaves it in CPU memory, Module::to(DType) leaves its dtype alone.
  Tensor register_host_buffer(const std::string& name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Each tensor once, under the first name it has in registration order (own tensors before the
  // children's): a tied weight or a module registered in two slots gives its tensors once, as
  // PyTorch's named_parameters() does. state_dict() lists every name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  // The direct children, each module once under its first slot name: a module registered in
  // two slots (a shared block) is one child, as in PyTorch's children()/named_children().
  std::vector<std::shared_ptr<Module>> children() const;
  NamedModules named_children() const;
  // Every child slot in registration order, a shared module once per slot: what forward chains
  // (Sequential), slot lookups and slot mirroring (models::LanguageModel) walk.
  const NamedModules& child_slots() const { return children_; }
  // This module ("") and every descendant with its qualified name ("blocks0.attn.out_proj"),
  // depth first in registration order (PyTorch's named_modules). A module reachable under two
  // names (registered in two slots) is listed once, under the first, and its subtree is walked
  // once, as PyTorch's named_modules(remove_duplicate=True). With remove_duplicate false a
  // shared module is listed under every slot path (its subtree under each), as state_dict()
  // keeps every name: what a user-given layer name (--quant-ignore, fp8_exclude) is resolved
  // against, since either name of a shared layer names it. The pointers do not own; they stay
  // valid while the tree is unchanged.
  std::vector<std::pair<std::string, Module*>> named_modules(bool remove_duplicate = true);
  std::vector<std::pair<std::string, const Module*>> named_modules(
      bool remove_duplicate = true) const;
  // The module in the direct child slot `name`; throws naming the slots that exist.
  std::shared_ptr<Module> child(const std::string& name) const;
  // child(name) as an M; throws when the slot now holds another type (it was replaced).
  template <typename M>
  std::shared_ptr<M> child_as(const std::string& name) const {
    std::shared_ptr<Module> m = child(name);
    auto typed = std::dynamic_pointer_cast<M>(m);
    if (!typed) throw_wrong_child_type(name, *m);
    return typed;
  }
  // The descendant at a dotted path ("h0.mlp.fc1"); "" is this module. Throws naming the
  // first part of the path that does not exist.
  Module& get_submodule(const std::string& qualified_name);
  const Module& get_submodule(const std::string& qualified_name) const;
  // Puts `module` into the existing child slot `name` and returns the module that was there.
  // The slot keeps its position, so named_parameters() and state_dict() keep their order and
  // (when the new module names its tensors the same) their names.
  std::shared_ptr<Module> replace_child(const std::string& name, std::shared_ptr<Module> module);
  // Calls fn on this module and then every descendant, depth first (like Module.apply), each
  // module once however many slots hold it.
  void apply(const std::function<void(Module&)>& fn);
  int64_t parameter_count() const;  // number of parameter elements

  // Training mode for this module and all descendants (Dropout reads it).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts floating parameters, buffers (except keep_dtype ones) and existing gradients to
  // `dtype` IN PLACE: the
  // TensorImpls keep their identity (new storage, dtype and strides), so Tensor handles held
  // by optimizers or user code stay valid and see the new values.
  Module& to(DType dtype);
  // Moves parameters, buffers and gradients to `device` in place, as to(DType) does (handles
  // stay valid), like torch.nn.Module.to(device). Move before the first optimizer step: the
  // optimizer's state is made on the parameters' device then.
  Module& to(Device device);
  // Frees every parameter's gradient (set_to_none, PyTorch 2.x's default).
  void zero_grad();

  // Parameters then buffers of each module, depth first; tensors are detached and share
  // storage with the module (copy them to snapshot).
  StateDict state_dict() const;
  // Copies values in (converting dtypes). Shape mismatches always throw; with strict, missing
  // or unexpected keys throw too, naming them. Nothing is modified when it throws.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);
  // `state` with the key names of earlier layouts renamed to this module tree's current ones
  // (the upgrade_state_dict hooks below); load_state_dict applies it first. Callers that check
  // a file's keys against state_dict() before loading apply it too.
  StateDict upgrade_legacy_keys(const StateDict& state) const;

  // Called by load_state_dict on this module and every descendant, before anything is checked
  // or copied, with the module's key prefix ("" or "fc."). A layer whose saved tensors change
  // size with their content (bitsandbytes' JSON quant state) resizes those buffers to the
  // incoming ones here, or throws when the incoming state does not fit the layer.
  virtual void prepare_load_state_dict(const std::string& /*prefix*/, const StateDict& /*state*/) {}
  // Called first, on a copy of the incoming state: a layer whose key names changed renames the
  // old names it finds under `prefix` to its current ones (MultiheadAttention's in_proj_weight
  // -> in_proj.weight), so files written before keep loading.
  virtual void upgrade_state_dict(const std::string& /*prefix*/, StateDict& /*state*/) const {}

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // A buffer whose name may contain '.', for layers that save under another library's key
  // layout (bitsandbytes' "weight.absmax"). Module::to never changes its dtype; with `host`,
  // Module::to(Device) leaves it in CPU memory too (state the host reads, as a host buffer).
  Tensor register_serialized_buffer(const std::string& name, Tensor tensor, bool host = false);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  std::string child_names() const;
  [[noreturn]] void throw_wrong_child_type(const std::string& name, const Module& found) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool recurse,
               NamedTensors& out) const;

  std::string name_;
  bool training_ = true;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::string> keep_dtype_buffers_;  // names of buffers Module::to skips
  std::vector<std::string> host_buffers_;        // names of buffers Module::to(Device) skips
  NamedModules children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace mantissa::nn
