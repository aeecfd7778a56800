#pragma once
// The recorded graph. Every differentiable op has one output; its Node maps the gradient of
// that output to one gradient per input. Ops record nodes with autograd::record, passing a
// lambda that captures what backward needs, so an op's forward and backward sit side by side.
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/tensor.h"

namespace mantissa::autograd {

// What an input looked like in forward: the engine checks and casts gradients against it.
struct InputMeta {
  Shape shape;
  DType dtype;
};

// The tensors an op hands to record: a braced list ({a, b}, which costs no heap allocation,
// where a vector built from it cost one per recorded op) or a vector. A view, valid for the
// call only.
class TensorList {
 public:
  TensorList() = default;
  // Assigned in the body: the list's array outlives the call that takes the TensorList, which
  // -Winit-list-lifetime cannot see from a member initializer.
  TensorList(std::initializer_list<Tensor> list) : size_(list.size()) { data_ = list.begin(); }
  TensorList(const std::vector<Tensor>& v) : data_(v.data()), size_(v.size()) {}
  const Tensor* begin() const { return data_; }
  const Tensor* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  const Tensor& operator[](size_t i) const { return data_[i]; }

 private:
  const Tensor* data_ = nullptr;
  size_t size_ = 0;
};

class Node {
 public:
  virtual ~Node() = default;
  // Gradients for each input, in order; an undefined Tensor means "no gradient".
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  // Drops saved tensors after backward (unless retain_graph).
  virtual void release_saved() {}
  // True for a node whose output is bf16/f16 and whose apply() starts by widening its gradient
  // to float32 (the backward of autocast's cached weight cast): it may be handed that gradient
  // already in float32, holding exactly the bf16/f16 values (widened_gradient_wanted).
  virtual bool takes_widened_gradient() const { return false; }

  // next[i] is the node receiving input i's gradient, nullptr when input i needs none.
  std::vector<std::shared_ptr<Node>> next;
  std::vector<InputMeta> input_meta;
  // Set only under anomaly detection (anomaly_mode.h): the model layer the op belongs to
  // ("" when unknown) and the order the op ran in, which attributes later ops to layers.
  std::string layer;
  uint64_t sequence = 0;
};

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// A node whose backward is a lambda; release_saved() frees the lambda and its captures.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return name_; }
  void release_saved() override {
    fn_ = nullptr;
    saved_.clear();
  }
  // Tensors the backward reads, with their storage's version now: apply() refuses to run once
  // one of them was written in place (copy_, fill_, an optimizer step), whose gradient would
  // come from the new values.
  void save_versions(TensorList saved);
  // For a backward function whose first step widens its bf16/f16 gradient to float32 (the cast
  // Tensor::to records from float32 down): Node::takes_widened_gradient.
  void set_takes_widened_gradient(bool takes) { takes_widened_ = takes; }
  bool takes_widened_gradient() const override { return takes_widened_; }

 private:
  struct SavedVersion {
    std::shared_ptr<Storage> storage;
    uint64_t version;
    size_t index;  // in the saved list, for the message
  };
  std::string name_;
  BackwardFn fn_;
  std::vector<SavedVersion> saved_;
  bool takes_widened_ = false;
};

// Sink for a leaf tensor's gradient: accumulates into tensor.grad in the leaf's dtype.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf it accumulates into; null once that tensor is gone.
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
inline bool needs_grad(const Tensor& a) { return needs_grad({&a}); }
inline bool needs_grad(const Tensor& a, const Tensor& b) { return needs_grad({&a, &b}); }
inline bool needs_grad(const Tensor& a, const Tensor& b, const Tensor& c) {
  return needs_grad({&a, &b, &c});
}

// Attaches a FunctionNode to `output` with edges to `inputs` (undefined inputs allowed).
// No-op when !needs_grad(inputs). Returns output for chaining.
Tensor record(const Tensor& output, TensorList inputs, std::string name, BackwardFn fn);
// The same for a backward that reads `saved` (tensors its lambda captured, inputs or outputs):
// it throws, as PyTorch does, when one of them was modified in place after this forward.
Tensor record(const Tensor& output, TensorList inputs, TensorList saved, std::string name,
              BackwardFn fn);

// The node a gradient for `t` should be sent to: its grad_fn, its AccumulateGrad when it is
// a leaf requiring grad, or nullptr.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// Inside a backward function: whether the gradient of input `input` (a bf16/f16 tensor) may be
// returned as float32 holding exactly its bf16/f16-rounded values, because the node it goes to
// widens it to float32 first anyway (Node::takes_widened_gradient). An op that computes the
// gradient in fp32 can then skip the narrow result and the widening pass after it (linear's
// weight gradient under autocast, detail::matmul_nograd_widened). The engine narrows such a
// gradient again wherever it must be summed with another, so the bits never change.
bool widened_gradient_wanted(size_t input);

// Runs backward from roots with the given gradients (same length).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph);

}  // namespace mantissa::autograd
