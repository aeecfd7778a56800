#include "mantissa/autograd/node.h"

#include "core/autograd/accumulate.h"
#include "core/autograd/anomaly.h"
#include "mantissa/autograd/grad_hooks.h"

namespace mantissa::autograd {

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  MANTISSA_CHECK(fn_ != nullptr, "autograd",
                 "trying to backward through {} a second time (its saved tensors were freed); "
                 "pass retain_graph=true to the first backward()",
                 name_);
  for (const SavedVersion& s : saved_) {
    MANTISSA_CHECK(s.storage->version() == s.version, "autograd",
                   "a tensor {} saved for its backward (number {} of its saved tensors) was "
                   "modified in place after the forward (version {}, now {}): its gradient would "
                   "use the new values. Modify a clone(), or modify it before the op uses it",
                   name_, s.index, s.version, s.storage->version());
  }
  return fn_(grad_output);
}

void FunctionNode::save_versions(TensorList saved) {
  for (size_t i = 0; i < saved.size(); ++i) {
    const Tensor& t = saved[i];
    if (t.defined() && t.impl().storage)
      saved_.push_back({t.impl().storage, t.impl().storage->version(), i});
  }
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  auto leaf = leaf_.lock();
  if (!leaf) return {};
  Tensor g = grad_output.dtype() == leaf->dtype ? grad_output : grad_output.to(leaf->dtype);
  if (leaf->grad) {
    leaf->grad = add_gradients(Tensor(leaf->grad), g).impl_ptr();
  } else {
    // Own a fresh contiguous buffer: the incoming gradient may alias a saved tensor or view.
    Tensor owned = g.is_contiguous() && g.storage().use_count() == 1 ? g : g.clone();
    leaf->grad = owned.detach().impl_ptr();
  }
  run_post_accumulate_grad_hooks(Tensor(leaf));
  return {};
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

namespace {
// needs_grad over any list of tensors (the vector form and record's TensorList).
bool any_needs_grad(TensorList inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
}  // namespace

bool needs_grad(const std::vector<Tensor>& inputs) { return any_needs_grad(inputs); }

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return impl.grad_fn;
  if (!impl.grad_accumulator)
    impl.grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return impl.grad_accumulator;
}

Tensor record(const Tensor& output, TensorList inputs, std::string name, BackwardFn fn) {
  return record(output, inputs, {}, std::move(name), std::move(fn));
}

Tensor record(const Tensor& output, TensorList inputs, TensorList saved, std::string name,
              BackwardFn fn) {
  if (!any_needs_grad(inputs)) return output;
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(fn));
  node->save_versions(saved);
  node->next.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    node->next.push_back(gradient_edge(in));
    node->input_meta.push_back(in.defined() ? InputMeta{in.shape(), in.dtype()}
                                            : InputMeta{{}, kFloat32});
  }
  if (detail::anomaly_enabled()) [[unlikely]]
    detail::check_forward(*node, output, std::vector<Tensor>(inputs.begin(), inputs.end()));
  TensorImpl& out = output.impl();
  out.requires_grad = true;
  out.grad_fn = std::move(node);
  return output;
}

}  // namespace mantissa::autograd
