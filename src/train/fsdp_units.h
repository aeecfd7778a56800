#pragma once
// The fsdp strategy's parameter sharding (docs/distributed.md, "How fsdp works").
//
// Units: the child slots of the module's outermost level that has more than one child with
// parameters (the GPT's embeddings, blocks and final norm; the layers of the MLP's and the
// CNN's Sequential), and the modules a ModuleList or ModuleDict in such a slot holds (a Hugging
// Face model's decoder layers, which its forward calls one by one). Each unit's slot holds a
// wrapper (same parameter, buffer and child names, so state dicts do not change) whose forward
// all-gathers the unit's parameters from the ranks' OptimizerShard slices into their storage
// (Storage::restore), runs the unit, and releases the storage again (Storage::release) unless
// backward is running; its output passes through an identity node whose backward gathers the unit
// again before the unit's own backward. Once the unit's last gradient is accumulated
// (post-accumulate-grad hooks), its gradients are reduce-scattered into the slices (on the step's
// last micro-batch; inside accumulation they stay whole and add up) and its parameters released.
//
// The root keeps the rest whole on every rank, as FSDP's root unit does: the parameters of the
// outer levels, of units whose trainable parameters are not all in the optimizer, not plain or
// shared,
// and of the first unit (the input embedding, which a tied output head reads after the last
// block, as the GPT's does). Its gradients are reduce-scattered after backward, and its
// parameters all-gathered after each update. A frozen parameter the optimizer does not hold
// (the norms beside QLoRA's adapters) stays whole on every rank, in a unit or not.
//
// A module that reads a unit's parameters outside the unit's forward (other than the first
// unit's) is not supported: the values are released there.
#include <memory>
#include <string>
#include <vector>

#include "mantissa/autograd/grad_hooks.h"
#include "mantissa/core/tensor.h"
#include "mantissa/nn/module.h"
#include "train/optimizer_shard.h"

namespace mantissa::train::detail {

class FsdpUnits {
 public:
  // Finds and wraps the units of `module`, whose parameters the optimizer of `shard` updates,
  // and releases their parameters (each rank keeping its slices in `shard`). A collective
  // nowhere: every rank finds the same units.
  // With `prefetch`, the gather of the unit expected next is started before the current unit
  // runs (forward: the next unit; backward: the previous one) and finished where that unit
  // starts; a prefetch nobody used is waited for and dropped at the end of the backward.
  // `param_dtype` (float32, bfloat16, float16): the dtype the units' float32 parameters are
  // all-gathered in for forward and backward (OptimizerShard::gather_parameters' wire); a
  // checkpoint's gather (gather_all) and unwrap gather the exact values.
  FsdpUnits(nn::Module& module, OptimizerShard& shard, DType reduce_dtype, bool prefetch = true,
            DType param_dtype = kFloat32);
  ~FsdpUnits();
  FsdpUnits(const FsdpUnits&) = delete;
  FsdpUnits& operator=(const FsdpUnits&) = delete;

  // The qualified names of the units ("h0", "net.2"), for messages and tests.
  std::vector<std::string> unit_names() const;

  // Around every backward; sync_gradients false inside an accumulation window.
  void before_backward(bool sync_gradients);
  // Releases every unit still gathered; on a synchronising backward reduce-scatters the
  // gradients not yet reduced (the root's, a unit whose parameters got no gradient). A
  // collective.
  void after_backward();
  // After the shard's update: the released parameters' values changed (their versions are
  // bumped, so casts cached from them are stale), the root's are all-gathered. A collective.
  void after_update();
  // Every unit's parameters all-gathered and kept (a checkpoint's save), and released again.
  void gather_all();
  void release_all();
  // The units' modules back in their slots, every parameter whole; the shard's slices are
  // released (the whole parameters hold the values; restore them before the shard is used
  // again). A collective; the object is spent.
  void unwrap();

  // Called by the units' wrappers.
  void before_unit_forward(size_t unit);
  Tensor after_unit_forward(size_t unit, const Tensor& output);

  // Prefetched gathers whose values a unit used, and all started (for tests and the docs'
  // claims: a forward and backward of U units uses U - 1 of each direction's).
  int64_t prefetches_used() const { return prefetches_used_; }
  int64_t prefetches_started() const { return prefetches_started_; }

 private:
  struct Unit;
  class Wrapper;
  OptimizerShard& shard_;
  DType reduce_dtype_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<size_t> root_indices_;  // whole optimizer indices kept whole
  std::vector<autograd::GradHookHandle> hooks_;
  bool in_backward_ = false;
  bool sync_gradients_ = true;
  bool keep_gathered_ = false;  // gather_all .. release_all
  bool unwrapped_ = false;
  bool prefetch_ = true;
  DType param_dtype_ = kFloat32;
  std::unique_ptr<OptimizerShard::PendingGather> pending_;  // one prefetch at a time
  size_t pending_unit_ = 0;
  int64_t prefetches_used_ = 0;
  int64_t prefetches_started_ = 0;
  void gather(size_t unit, bool exact = false);
  void prefetch(size_t unit);
  void drop_prefetch();
  void release(Unit& u);
  void on_gradient(size_t unit);
};

}  // namespace mantissa::train::detail
