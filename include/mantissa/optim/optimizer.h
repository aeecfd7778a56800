#pragma once
// Optimizer base (torch.optim.Optimizer): parameter groups, per-parameter state, zero_grad,
// per-group learning rates and a state dict that a checkpoint can store as named tensors plus
// JSON metadata. Each concrete optimizer (SGD, Adam, AdamW) keeps its hyper-parameters per
// group and writes its update as one fused loop per parameter.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/core/tensor.h"

namespace mantissa::optim {

// Serialisable optimizer state, in PyTorch's layout with parameters numbered 0..n-1 in group
// order:
//   tensors: "state.<i>.<buffer>" -> tensor (exp_avg, exp_avg_sq, max_exp_avg_sq,
//            momentum_buffer, and master_param for half parameters with master weights).
//            The tensors alias the optimizer's live state: write or clone them before the
//            next step(). State on a GPU is copied to the CPU instead (load_state_dict
//            copies it back to each parameter's device).
//   meta:    {"optimizer": "Adam",
//             "param_groups": [{"lr": 0.001, ..., "params": [0, 1]}, ...],
//             "state": {"0": {"step": 3}, ...}}
struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  nlohmann::json meta;
};

// How a parameter group updates float16/bfloat16 parameters ("true half precision"); every
// optimizer's options carry these four fields, and float32/float64 parameters ignore them.
// See docs/half_precision.md.
//  - default: the state (exp_avg, momentum_buffer, ...) has the parameter's dtype, as
//    torch.optim keeps it (zeros_like(param)); the math runs in fp32 and each stored value is
//    rounded to nearest even once per step. Updates below half an ulp of a weight are lost.
//  - master_weights: an fp32 copy of each half parameter (taken when the group is added) gets
//    the update, with fp32 state; the parameter is its RNE rounding. +4 bytes per parameter,
//    state at 4 bytes per element. Saved as "state.<i>.master_param". An element whose
//    parameter was written from outside (weights loaded later) restarts from the parameter.
//  - stochastic_rounding: the parameter is stored with unbiased stochastic rounding
//    (deterministic per rounding_seed, step, parameter and element; thread-count independent).
//    Excludes master_weights. The state is still rounded to nearest.
//  - fp32_state: keep the state in fp32 without a master copy (with stochastic_rounding this is
//    llm.c's bf16 recipe).
// master_weights and fp32_state fix the state's memory layout: they belong to the optimizer
// as constructed and load_state_dict keeps them (converting the loaded state), while
// stochastic_rounding and rounding_seed load like the other hyper-parameters.
// (Not to be confused with train::HalfPrecision, the "16-true"/"bf16-true" Trainer plugin.)
struct HalfPrecisionOptions {
  bool master_weights = false;
  bool stochastic_rounding = false;
  bool fp32_state = false;
  uint64_t rounding_seed = 0;
};

// Thrown by an optimizer that refuses a step because a gradient holds NaN or inf (the 8-bit
// optimizers do: a non-finite value would poison a whole block of quantized state); the step
// changed nothing. parameter() is the parameter whose gradient it is, so a caller that knows the
// model (the Trainer) can name it.
class NonFiniteGradient : public Error {
 public:
  NonFiniteGradient(const std::string& message, Tensor parameter)
      : Error(message), parameter_(std::move(parameter)) {}
  const Tensor& parameter() const { return parameter_; }

 private:
  Tensor parameter_;
};

// One parameter's optimizer state: its step count and named buffers.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> buffers;
  bool empty() const { return step == 0 && buffers.empty(); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam", "AdamW": stored in the state dict and checked on load.
  virtual std::string_view name() const = 0;

  // One update of every parameter that has a gradient (parameters whose grad is undefined
  // are skipped, as in PyTorch).
  virtual void step() = 0;
  // step() for a caller that has just found every gradient finite (GradScaler::step after its
  // inf check): an optimizer that scans the gradients itself before changing anything (the
  // 8-bit ones) skips that pass. The others simply step.
  virtual void step_with_finite_grads() { step(); }

  // True for optimizers that unscale fp16 loss-scaled gradients inside step() (PyTorch's
  // fused optimizers, `_step_supports_amp_scaling`): their gradients cannot be clipped before
  // the step under a GradScaler. None of mantissa's own optimizers do.
  virtual bool step_supports_amp_scaling() const { return false; }

  // The updates this optimizer has made since it was built: step() and step_with_finite_grads()
  // calls that returned. A step a GradScaler skipped (it never calls the optimizer) or one
  // refused over a non-finite gradient is none. Not in the state dict. LR schedulers read it to
  // warn when they step before the optimizer ever did (torch's `_opt_called`).
  int64_t step_count() const { return step_count_; }

  // Frees every gradient (PyTorch's zero_grad(set_to_none=True), the default since 2.0).
  void zero_grad();

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const;
  std::vector<Tensor> parameters() const;  // all groups, in order

  // A group's hyper-parameters as its state dict's param_groups hold them ("lr",
  // "weight_decay", "betas", ...; no "params"), and back (checked as load_state_dict checks
  // them). The Trainer compares them with a checkpoint's on resume and applies changed ones.
  nlohmann::json group_options(size_t group) const { return group_options_json(group); }
  void set_group_options(size_t group, const nlohmann::json& options) {
    set_group_options_json(group, options);
  }

  // Learning rate per group (schedulers set these).
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  void set_lr(double lr);  // every group

  // State of one parameter (nullptr when it is not in this optimizer). A half parameter with
  // master weights has its fp32 master in buffers["master_param"] from construction on.
  const ParamState* state(const Tensor& param) const;

  // Bytes of optimizer state held now (moments, 8-bit codes and their absmax, master weights),
  // over every parameter; state is created on a parameter's first step.
  int64_t state_bytes() const;
  // Frees a parameter's state (steps and buffers; no-op for a parameter not in this
  // optimizer). A zero1 rank drops the state of the parameters other ranks update, e.g. after
  // loading a whole checkpoint; a later step of the parameter starts its state afresh.
  void release_state(const Tensor& param);

  OptimizerState state_dict() const;
  // Restores hyper-parameters and state saved by state_dict() of an optimizer of the same
  // kind over parameters of the same shapes. State tensors are copied (cast to the state
  // dtype of each parameter), so the loaded dict may be freed afterwards.
  void load_state_dict(const OptimizerState& state);

 protected:
  Optimizer() = default;

  // Each optimizer calls this at the end of a completed update (step_count()); one written
  // outside mantissa must too, or its LR schedulers warn that they are stepped first.
  void count_step() { ++step_count_; }

  // Validates and appends a group's parameters (derived classes append its options too, then
  // call init_half_state).
  void add_params(std::vector<Tensor> params);
  // Creates the fp32 master copies of a group's half parameters when the group uses them.
  void init_half_state(size_t group);
  ParamState& state_at(size_t group, size_t index) { return state_[group][index]; }
  const ParamState& state_at(size_t group, size_t index) const { return state_[group][index]; }
  // state_at for a step: the state made to fit the parameter as it is now. A parameter whose
  // dtype changed since its state was made (Module::to after some steps) gets an fp32 master
  // when its group now calls for one (from its current values) and loses one it no longer
  // needs; state_buffer converts the other buffers.
  ParamState& state_for_update(size_t group, size_t index);
  // Buffer `name` of a parameter's state in `dtype` on `device`: zeros when it does not exist
  // yet, else the existing one, converted (values kept) if it is in another dtype or on
  // another device, as after Module::to.
  static Tensor& state_buffer(ParamState& st, const std::string& name, const Shape& shape,
                              DType dtype, Device device);

  // Hyper-parameters of a group as JSON (without "params"), and back. LR schedulers read and
  // set them (OneCycleLR cycles the momentum).
  friend class LRScheduler;
  virtual nlohmann::json group_options_json(size_t group) const = 0;
  virtual void set_group_options_json(size_t group, const nlohmann::json& options) = 0;
  // Throws when a loaded state is unusable by this group's options (missing buffers).
  virtual void check_loaded_state(size_t /*group*/, const ParamState& /*state*/) const {}
  // The copy of a saved state tensor "state.<i>.<buffer>" (key) that parameter `index` of
  // `group` keeps, checked against what it needs. The default takes the parameter's shape and
  // the state dtype (fp32 for "master_param"); optimizers with other layouts override it.
  virtual Tensor loaded_buffer(size_t group, size_t index, const std::string& buffer,
                               const Tensor& saved, const std::string& key) const;
  // The group's half-precision policy (from its options).
  virtual HalfPrecisionOptions half_precision(size_t group) const = 0;

  // The checked gradient of a parameter about to be updated: undefined when the parameter
  // has none, else contiguous with the parameter's shape and dtype.
  static Tensor grad_for_update(const Tensor& param, const char* where);
  // grad_for_update of every parameter, per group, all checked before a step changes any
  // state: one bad gradient leaves every parameter, buffer and step count as it was.
  std::vector<std::vector<Tensor>> checked_grads(const char* where) const;
  // Dtype in which state of a parameter is kept: the parameter's own, except fp32 for half
  // parameters of a group with master_weights or fp32_state.
  DType state_dtype(size_t group, const Tensor& param) const;
  // Whether a parameter of a group is updated through an fp32 master copy.
  bool uses_master(size_t group, const Tensor& param) const;
  // Position of parameter i of a group in the state dict's numbering (0..n-1 over all groups):
  // with the step, it keys the stochastic-rounding stream.
  int64_t param_index(size_t group, size_t index) const;

 private:
  void load_state_dict_checked(const OptimizerState& state);

  std::vector<std::vector<Tensor>> groups_;
  std::vector<std::vector<ParamState>> state_;
  int64_t step_count_ = 0;
};

// Shared validation helper: "[where] Invalid <what>: <value>" like torch.optim's ValueErrors.
void check_hyper(bool ok, const char* where, const char* what, double value);
// Throws for contradictory half-precision options (master_weights with stochastic_rounding).
void check_half_precision(const HalfPrecisionOptions& h, const char* where);

}  // namespace mantissa::optim
