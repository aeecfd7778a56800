// The first training step's check that its loss can train the model (train/loss_reach_check.h).
#include "train/loss_reach_check.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"

namespace mantissa::train::detail {
namespace {

// The nodes of the graph behind `loss`, each once, in the order a depth-first walk meets them
// (so the message lists tensors in the same order every run).
std::vector<const autograd::Node*> graph_nodes(const Tensor& loss) {
  std::vector<const autograd::Node*> order;
  std::unordered_set<const autograd::Node*> seen;
  const std::shared_ptr<autograd::Node> root = autograd::gradient_edge(loss);
  if (!root) return order;
  std::vector<const autograd::Node*> stack{root.get()};
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    order.push_back(n);
    for (auto it = n->next.rbegin(); it != n->next.rend(); ++it)
      if (*it) stack.push_back(it->get());
  }
  return order;
}

// Up to 4 names in a message.
std::string some_names(const std::vector<std::string>& names) { return first_names(names, 4); }

constexpr const char* kCause =
    "The usual cause: forward calls layers through member pointers kept from the constructor "
    "(fc1->forward(x)), but the precision plugin, apply_lora or replace_modules put new modules "
    "in their slots, so forward still runs the old layers; call the module in the slot "
    "(child(\"fc1\")->forward(x)) or read the member again after setup (docs/trainer.md, "
    "\"Swapped layers\")";

}  // namespace

void check_loss_reaches_parameters(const Tensor& loss, const nn::Module& module,
                                   const optim::Optimizer& optimizer,
                                   const std::string& precision) {
  // What trains: the module's parameters that require grad, and the optimizer's (Apex's O2
  // steps fp32 masters of the model's half weights).
  std::unordered_map<const TensorImpl*, std::string> trainable;
  std::vector<const TensorImpl*> module_params;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    trainable.emplace(p.impl_ptr().get(), name);
    module_params.push_back(p.impl_ptr().get());
  }
  const std::vector<Tensor> optimized = optimizer.parameters();
  for (size_t i = 0; i < optimized.size(); ++i)
    if (optimized[i].requires_grad())
      trainable.emplace(optimized[i].impl_ptr().get(), fmt::format("optimizer tensor {}", i));
  MANTISSA_CHECK(!trainable.empty(), "Trainer",
                 "nothing to train: no parameter of {} and none of the {} tensors its optimizer "
                 "holds requires grad (all frozen); unfreeze the ones to train "
                 "(requires_grad_(true)) before fit",
                 module.name(), optimized.size());

  const std::vector<const autograd::Node*> nodes = graph_nodes(loss);
  std::unordered_set<const TensorImpl*> reached;
  std::vector<std::string> foreign;  // leaves that require grad, outside the module and optimizer
  for (const autograd::Node* n : nodes) {
    const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n);
    if (acc == nullptr) continue;
    const std::shared_ptr<TensorImpl> leaf = acc->leaf();
    if (!leaf) continue;
    if (trainable.count(leaf.get()) != 0)
      reached.insert(leaf.get());
    else
      foreign.push_back(shape_str(leaf->shape));
  }
  const std::string precision_text =
      precision == "32-true" ? "" : fmt::format(" (precision '{}')", precision);
  if (reached.empty()) {
    std::vector<std::string> names;
    for (const TensorImpl* t : module_params) names.push_back(trainable.at(t));
    fail("Trainer",
         "the loss of the first training step{} depends on none of the {} parameters that train "
         "({}){}: no step could change it. {}; otherwise check that training_step computes the "
         "loss from the model's output",
         precision_text, module_params.empty() ? trainable.size() : module_params.size(),
         names.empty() ? "the optimizer's" : some_names(names),
         foreign.empty() ? ""
                         : fmt::format(", but on {} other tensor(s) that require grad ({})",
                                       foreign.size(), some_names(foreign)),
         kCause);
  }
  std::vector<std::string> missed;
  for (const TensorImpl* t : module_params)
    if (reached.count(t) == 0) missed.push_back(trainable.at(t));
  if (!missed.empty() && !foreign.empty()) {
    warn(fmt::format(
        "the loss of the first training step{} depends on none of {} parameter(s) of the model "
        "({}) but on {} tensor(s) that require grad outside it ({}): those parameters will not "
        "train. {}",
        precision_text, missed.size(), some_names(missed), foreign.size(), some_names(foreign),
        kCause));
  }
}

}  // namespace mantissa::train::detail
