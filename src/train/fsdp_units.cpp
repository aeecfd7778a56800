// FsdpUnits (fsdp_units.h): the fsdp strategy's units, their wrappers, and the gathers,
// releases and gradient reduce-scatters around each unit's forward and backward.
#include "train/fsdp_units.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <typeinfo>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/error.h"
#include "mantissa/nn/module_list.h"
#include "train/optimizer_shard.h"

namespace mantissa::train::detail {

struct FsdpUnits::Unit {
  std::string name;                   // qualified, for messages
  nn::Module* parent = nullptr;       // whose slot holds the wrapper
  std::string slot;                   // the slot's name in parent
  std::shared_ptr<nn::Module> inner;  // the module itself
  std::shared_ptr<nn::Module> wrapper;
  std::vector<size_t> indices;  // the whole optimizer's parameter numbers, ascending
  std::vector<Tensor> params;
  int64_t trainable = 0;  // parameters whose gradient backward accumulates
  int64_t received = 0;   // of them, accumulated in this backward
  bool released = false;
  bool reduced = false;  // its gradients reduce-scattered in this backward
  bool rounded = false;  // gathered in a param_dtype narrower than the values
};

// Stands in a unit's slot: the same parameter, buffer and child names (state dicts and
// named_parameters do not change), the unit's forward between a gather and a release.
class FsdpUnits::Wrapper final : public nn::Module {
 public:
  Wrapper(FsdpUnits& owner, size_t unit, std::shared_ptr<nn::Module> inner)
      : nn::Module(inner->name()), owner_(&owner), unit_(unit), inner_(std::move(inner)) {
    for (const auto& [n, p] : inner_->named_parameters(/*recurse=*/false))
      register_parameter(n, p, p.requires_grad());
    for (const auto& [n, b] : inner_->named_buffers(/*recurse=*/false)) register_buffer(n, b);
    for (const auto& [n, c] : inner_->child_slots()) register_module(n, c);
  }
  Tensor forward(const Tensor& input) override {
    if (owner_ == nullptr) return inner_->forward(input);
    owner_->before_unit_forward(unit_);
    return owner_->after_unit_forward(unit_, inner_->forward(input));
  }
  // The owner is going away: from now on the unit's forward runs directly.
  void detach_owner() { owner_ = nullptr; }
  std::string extra_repr() const override { return inner_->extra_repr(); }
  void train(bool on) override {
    nn::Module::train(on);
    inner_->train(on);
  }

 private:
  FsdpUnits* owner_;
  size_t unit_;
  std::shared_ptr<nn::Module> inner_;
};

namespace {

// A parameter whose storage holds it alone, contiguous, in host memory: releasing that storage
// releases exactly its values.
bool owns_its_storage(const Tensor& p) {
  const TensorImpl& impl = p.impl();
  return p.device().is_cpu() && p.is_contiguous() && impl.offset == 0 &&
         impl.storage->nbytes() == static_cast<size_t>(p.numel()) * p.dtype().itemsize();
}

}  // namespace

FsdpUnits::FsdpUnits(nn::Module& module, OptimizerShard& shard, DType reduce_dtype, bool prefetch,
                     DType param_dtype)
    : shard_(shard), reduce_dtype_(reduce_dtype), prefetch_(prefetch), param_dtype_(param_dtype) {
  // The level: down through modules that hold no parameter of their own and one child with
  // parameters (ImageClassifier -> its Sequential).
  nn::Module* level = &module;
  std::string prefix;
  for (;;) {
    if (!level->named_parameters(/*recurse=*/false).empty()) break;
    std::vector<std::pair<std::string, nn::Module*>> with;
    for (const auto& [name, child] : level->child_slots())
      if (child && child->parameter_count() > 0) with.emplace_back(name, child.get());
    if (with.size() != 1) break;
    prefix += with[0].first + ".";
    level = with[0].second;
  }
  const std::vector<Tensor>& whole = shard.parameters();
  auto index_of = [&](const Tensor& p) -> int64_t {
    for (size_t i = 0; i < whole.size(); ++i)
      if (whole[i].is_same(p)) return static_cast<int64_t>(i);
    return -1;
  };
  // Slots holding a module that another slot holds too stay in the root.
  std::map<const nn::Module*, int> holders;
  for (const auto& [name, child] : level->child_slots()) ++holders[child.get()];
  std::set<size_t> taken;
  // A unit for `child` in `parent`'s slot `slot`, when every parameter it holds is one of the
  // optimizer's, alone in its storage and in no other unit. A frozen parameter outside the
  // optimizer (a norm's weight beside QLoRA's adapters) is no part of the unit: it stays whole
  // on every rank, as a buffer does.
  auto add_unit = [&](nn::Module* parent, const std::string& slot,
                      const std::shared_ptr<nn::Module>& child, std::string name) {
    auto u = std::make_unique<Unit>();
    u->name = std::move(name);
    u->parent = parent;
    u->slot = slot;
    u->inner = child;
    for (const Tensor& p : child->parameters()) {
      const int64_t i = index_of(p);
      if (i < 0 && !p.requires_grad()) continue;
      if (i < 0 || !owns_its_storage(p) || taken.count(static_cast<size_t>(i)) > 0) return;
      u->indices.push_back(static_cast<size_t>(i));
      u->params.push_back(p);
      if (p.requires_grad()) ++u->trainable;
    }
    if (u->params.empty()) return;
    std::sort(u->indices.begin(), u->indices.end());
    try {
      u->wrapper = std::make_shared<Wrapper>(*this, units_.size(), child);
    } catch (const Error&) {
      return;  // a layout the wrapper cannot mirror (a serialized buffer): stays in the root
    }
    taken.insert(u->indices.begin(), u->indices.end());
    units_.push_back(std::move(u));
  };
  bool first = true;
  for (const auto& [name, child] : level->child_slots()) {
    if (!child || child->parameter_count() == 0) continue;
    if (first) {  // the input embedding (a tied head reads it after the last block)
      first = false;
      continue;
    }
    if (holders[child.get()] > 1) continue;
    // A ModuleList or ModuleDict has no forward: its owner calls the modules it holds (a
    // Hugging Face model's decoder layers), so each of those is a unit.
    if (typeid(*child) == typeid(nn::ModuleList) || typeid(*child) == typeid(nn::ModuleDict)) {
      std::map<const nn::Module*, int> inner_holders;
      for (const auto& [n, c] : child->child_slots()) ++inner_holders[c.get()];
      for (const auto& [n, c] : child->child_slots())
        if (c && c->parameter_count() > 0 && inner_holders[c.get()] == 1)
          add_unit(child.get(), n, c, prefix + name + "." + n);
      continue;
    }
    add_unit(level, name, child, prefix + name);
  }
  for (size_t i = 0; i < whole.size(); ++i)
    if (taken.count(i) == 0) root_indices_.push_back(i);
  for (size_t k = 0; k < units_.size(); ++k) {
    Unit& u = *units_[k];
    u.parent->replace_child(u.slot, u.wrapper);
    for (const Tensor& p : u.params)
      if (p.requires_grad())
        hooks_.push_back(autograd::register_post_accumulate_grad_hook(
            p, [this, k](const Tensor&) { on_gradient(k); }));
    release(u);
  }
}

FsdpUnits::~FsdpUnits() {
  if (unwrapped_) return;
  if (pending_) pending_->work.reset();  // waits: MPI still writes into the buffers
  // Without unwrap (a fit that threw, a Trainer gone while its module was sharded). The
  // module may be gone already (the caller's, destroyed before the Trainer), so only what this
  // object holds is touched: the wrappers stay in their slots and run their units directly,
  // and the parameters get storage again; no collective runs here, so released values are
  // lost: they read as NaN (all bits set, in every float format), not as whatever the
  // allocator held.
  hooks_.clear();
  for (auto& u : units_) {
    static_cast<Wrapper&>(*u->wrapper).detach_owner();
    for (const Tensor& p : u->params) {
      if (!p.storage()->released()) continue;
      p.storage()->restore();
      std::memset(p.storage()->data(), 0xFF, p.storage()->nbytes());
    }
  }
}

std::vector<std::string> FsdpUnits::unit_names() const {
  std::vector<std::string> names;
  for (const auto& u : units_) names.push_back(u->name);
  return names;
}

void FsdpUnits::gather(size_t unit, bool exact) {
  Unit& u = *units_[unit];
  if (!u.released && !(exact && u.rounded)) return;
  if (u.released)
    for (const Tensor& p : u.params) p.storage()->restore();
  const DType wire = exact ? kFloat32 : param_dtype_;
  if (pending_ && pending_unit_ == unit && pending_->wire == wire) {
    shard_.finish_gather_parameters(*pending_);
    pending_.reset();
    ++prefetches_used_;
  } else {
    if (pending_ && pending_unit_ == unit) drop_prefetch();
    shard_.gather_parameters(u.indices, wire);
  }
  u.released = false;
  u.rounded = wire != kFloat32;
}

// Started only for a released unit, and only while no other prefetch is in flight: the
// ranks run the same units in the same order, so they start (and finish or drop) the same
// non-blocking gathers in the same order, as MPI requires.
void FsdpUnits::prefetch(size_t unit) {
  if (!prefetch_ || pending_ || unit >= units_.size() || !units_[unit]->released) return;
  pending_ = shard_.start_gather_parameters(units_[unit]->indices, param_dtype_);
  pending_unit_ = unit;
  ++prefetches_started_;
}

void FsdpUnits::drop_prefetch() {
  if (!pending_) return;
  pending_->work->wait();
  pending_.reset();
}

void FsdpUnits::release(Unit& u) {
  if (u.released || keep_gathered_) return;
  for (const Tensor& p : u.params) p.storage()->release();
  u.released = true;
}

void FsdpUnits::before_unit_forward(size_t unit) {
  // A gather other than the prefetched one (a model that skips a unit) drops the prefetch
  // first, so that at most one is in flight.
  if (pending_ && pending_unit_ != unit && units_[unit]->released) drop_prefetch();
  gather(unit);
  // A forward inside backward (activation checkpointing's recomputation) is followed by the
  // unit's own backward, which prefetches in backward order.
  if (!in_backward_) prefetch(unit + 1);
}

Tensor FsdpUnits::after_unit_forward(size_t unit, const Tensor& output) {
  // A forward inside backward is activation checkpointing's recomputation: the backward that
  // follows needs the values.
  if (!in_backward_) release(*units_[unit]);
  if (!output.defined() || !GradMode::is_enabled() || !output.requires_grad()) return output;
  // The identity whose backward runs before the unit's own: the unit gathered again.
  return autograd::record(output.detach(), {output}, "FsdpGatherForBackward",
                          [this, unit](const Tensor& grad) {
                            if (pending_ && pending_unit_ != unit && units_[unit]->released)
                              drop_prefetch();
                            gather(unit);
                            if (unit > 0) prefetch(unit - 1);
                            return std::vector<Tensor>{grad};
                          });
}

void FsdpUnits::before_backward(bool sync_gradients) {
  in_backward_ = true;
  sync_gradients_ = sync_gradients;
  for (auto& u : units_) {
    u->received = 0;
    u->reduced = false;
  }
}

void FsdpUnits::on_gradient(size_t unit) {
  Unit& u = *units_[unit];
  if (!in_backward_ || ++u.received != u.trainable) return;
  if (sync_gradients_) {
    shard_.reduce_scatter_gradients_of(u.indices, reduce_dtype_);
    u.reduced = true;
  }
  release(u);
}

void FsdpUnits::after_backward() {
  in_backward_ = false;
  drop_prefetch();  // a unit that got no backward (none trains); the update changes the slices
  std::vector<size_t> pending = root_indices_;
  for (auto& u : units_) {
    if (sync_gradients_ && !u->reduced)
      pending.insert(pending.end(), u->indices.begin(), u->indices.end());
    release(*u);
  }
  if (!sync_gradients_) return;
  std::sort(pending.begin(), pending.end());
  shard_.reduce_scatter_gradients_of(pending, reduce_dtype_);
}

void FsdpUnits::after_update() {
  for (auto& u : units_)
    for (const Tensor& p : u->params) p.storage()->bump_version();
  if (root_indices_.empty()) return;
  shard_.gather_parameters(root_indices_);
  // The step's new values, written through data pointers (as the units' above).
  for (size_t i : root_indices_) shard_.parameters()[i].storage()->bump_version();
}

void FsdpUnits::gather_all() {
  drop_prefetch();
  keep_gathered_ = true;
  for (size_t k = 0; k < units_.size(); ++k) gather(k, /*exact=*/true);
}

void FsdpUnits::release_all() {
  keep_gathered_ = false;
  for (auto& u : units_) release(*u);
}

void FsdpUnits::unwrap() {
  if (unwrapped_) return;
  keep_gathered_ = true;
  hooks_.clear();
  // Unit by unit, each unit's slices released once its whole values are back: the rank never
  // holds a parameter's values twice, so the end of a fit is not its peak.
  auto release_slices = [this](const std::vector<size_t>& indices) {
    for (size_t i : indices)
      if (const Tensor& s = shard_.slice(i); s.numel() > 0) s.storage()->release();
  };
  drop_prefetch();
  for (size_t k = 0; k < units_.size(); ++k) {
    Unit* u = units_[k].get();
    gather(k, /*exact=*/true);
    release_slices(u->indices);
    u->parent->replace_child(u->slot, u->inner);
  }
  release_slices(root_indices_);
  unwrapped_ = true;
}

}  // namespace mantissa::train::detail
