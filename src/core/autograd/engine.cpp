// The backward engine: a topological walk of the recorded graph from the roots, summing the
// gradients that reach each node before running it, so every node runs exactly once.
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "core/autograd/accumulate.h"
#include "core/autograd/anomaly.h"
#include "core/autograd/backward_state.h"
#include "core/complex_parts.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"

namespace mantissa::autograd {
namespace {

// Number of edges into each node reachable from the roots.
std::unordered_map<Node*, int> count_dependencies(const std::vector<std::shared_ptr<Node>>& roots) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const auto& r : roots) {
    if (r && !seen[r.get()]) {
      seen[r.get()] = true;
      stack.push_back(r.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& next : n->next) {
      if (!next) continue;
      deps[next.get()] += 1;
      if (!seen[next.get()]) {
        seen[next.get()] = true;
        stack.push_back(next.get());
      }
    }
  }
  return deps;
}

// Bit i: input i's gradient may come back widened (widened_gradient_wanted), for the backward
// function running on this thread now.
thread_local uint64_t t_widened_inputs = 0;

bool low_precision(DType dt) { return dt == kBFloat16 || dt == kFloat16; }

// The inputs of `node` whose gradient its consumer would widen to float32 first anyway.
uint64_t widened_inputs(const Node& node) {
  uint64_t bits = 0;
  for (size_t i = 0; i < node.next.size() && i < 64; ++i)
    if (node.next[i] && node.next[i]->takes_widened_gradient() &&
        low_precision(node.input_meta[i].dtype))
      bits |= uint64_t{1} << i;
  return bits;
}

// Sets t_widened_inputs for one backward function (restored after, exceptions included).
class WidenedInputsScope {
 public:
  explicit WidenedInputsScope(uint64_t bits) : saved_(std::exchange(t_widened_inputs, bits)) {}
  ~WidenedInputsScope() { t_widened_inputs = saved_; }
  WidenedInputsScope(const WidenedInputsScope&) = delete;
  WidenedInputsScope& operator=(const WidenedInputsScope&) = delete;

 private:
  uint64_t saved_;
};

// Makes a gradient match what the input looked like in forward: same shape (else a bug in
// the op's backward, reported loudly) and same dtype (casts back, e.g. bf16 -> fp32), except a
// float32 gradient of a bf16/f16 input whose consumer takes it widened.
Tensor conform(const Tensor& g, const InputMeta& meta, const Node& node, bool widened) {
  MANTISSA_CHECK(g.shape() == meta.shape, "autograd",
                 "{} returned a gradient of shape {} for an input of shape {}", node.name(),
                 shape_str(g.shape()), shape_str(meta.shape));
  if (g.dtype() == meta.dtype) return g;
  if (widened && g.dtype() == kFloat32) return g;
  // A real input of a complex computation receives the real part (PyTorch's rule).
  if (g.dtype().is_complex() && !meta.dtype.is_complex())
    return complex_real_part(g).to(meta.dtype);
  return g.to(meta.dtype);
}

}  // namespace

bool widened_gradient_wanted(size_t input) {
  return input < 64 && (t_widened_inputs >> input & 1) != 0;
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph) {
  NoGradGuard no_grad;  // backward computations are not recorded (no create_graph)
  BackwardScope scope;  // ops called by backward functions never apply autocast
  std::vector<std::shared_ptr<Node>> root_nodes;
  std::unordered_map<Node*, Tensor> pending;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    MANTISSA_CHECK(r.requires_grad(), "backward",
                   "element {} of tensors does not require grad and does not have a grad_fn "
                   "(nothing it was computed from requires grad: the parameters are frozen, it "
                   "was computed under NoGradGuard, or forward called layers that a plugin or "
                   "apply_lora swapped out of the model's slots; docs/trainer.md, \"Swapped "
                   "layers\")",
                   i);
    auto node = gradient_edge(r);
    Tensor g = grads[i];
    MANTISSA_CHECK(g.shape() == r.shape(), "backward",
                   "gradient has shape {} but the tensor has shape {}", shape_str(g.shape()),
                   shape_str(r.shape()));
    if (g.dtype() != r.dtype()) g = g.to(r.dtype());
    auto it = pending.find(node.get());
    if (it == pending.end()) {
      pending.emplace(node.get(), g);
      root_nodes.push_back(node);
    } else {
      it->second = add_gradients(it->second, g);
    }
  }

  auto deps = count_dependencies(root_nodes);
  // Ready queue: nodes whose every incoming gradient has arrived. Keep shared_ptrs alive.
  std::vector<std::shared_ptr<Node>> ready;
  for (const auto& r : root_nodes)
    if (deps[r.get()] == 0) ready.push_back(r);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    auto slot = pending.find(node.get());
    Tensor grad_out = slot == pending.end() ? Tensor() : std::move(slot->second);
    if (slot != pending.end()) pending.erase(slot);
    // A node that no gradient reached does not run; its inputs get "no gradient" from it.
    std::vector<Tensor> grads_in;
    const uint64_t widened = grad_out.defined() ? widened_inputs(*node) : 0;
    if (grad_out.defined()) {
      {
        // Named always: errors inside the backward function name it (profiling::current_op).
        const std::string node_name = node->name();
        profiling::OpScope timing("backward", node_name);
        const WidenedInputsScope scope(widened);
        grads_in = node->apply(grad_out);
      }
      if (detail::anomaly_enabled()) [[unlikely]]
        detail::check_backward(*node, grads_in);
      if (!retain_graph) node->release_saved();
      MANTISSA_CHECK(grads_in.empty() || grads_in.size() == node->next.size(), "autograd",
                     "{} returned {} gradients for {} inputs", node->name(), grads_in.size(),
                     node->next.size());
    }
    for (size_t i = 0; i < node->next.size(); ++i) {
      const auto& next = node->next[i];
      if (!next) continue;
      if (i < grads_in.size() && grads_in[i].defined()) {
        const InputMeta& meta = node->input_meta[i];
        const Tensor g = conform(grads_in[i], meta, *node, i < 64 && (widened >> i & 1) != 0);
        auto [it, inserted] = pending.try_emplace(next.get(), g);
        // Gradients meeting at one node are summed in the input's dtype, as if none had been
        // widened (narrowing a widened one back is exact).
        const auto narrow = [&](const Tensor& t) {
          return t.dtype() == meta.dtype ? t : t.to(meta.dtype);
        };
        if (!inserted)
          it->second = it->second.defined() ? add_gradients(narrow(it->second), narrow(g)) : g;
      }
      if (--deps[next.get()] == 0) ready.push_back(next);
    }
  }
}

}  // namespace mantissa::autograd
