// Activation checkpointing (mantissa/nn/checkpoint.h): the first forward without a graph, and a
// backward node that replays it under the first forward's autocast and random state and
// backpropagates through the replay.
#include "mantissa/nn/checkpoint.h"

#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/autograd/recompute.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/core/managed_precision.h"
#include "mantissa/nn/attention.h"
#include "mantissa/nn/dropout.h"

namespace mantissa::nn {
namespace {

constinit thread_local int t_checkpoint_depth = 0;

// Marks a checkpointed function's run (in_checkpoint).
class CheckpointDepth {
 public:
  CheckpointDepth() { ++t_checkpoint_depth; }
  ~CheckpointDepth() { --t_checkpoint_depth; }
  CheckpointDepth(const CheckpointDepth&) = delete;
  CheckpointDepth& operator=(const CheckpointDepth&) = delete;
};

// The autocast state of the first forward, reopened around the replay as regions of its own
// (the forward's regions have closed by the time backward runs).
struct AutocastState {
  bool cpu_enabled = false;
  DType cpu_dtype = kBFloat16;
  bool cuda_enabled = false;
  DType cuda_dtype = kFloat16;
  bool cache_enabled = true;

  static AutocastState now() {
    return {amp::is_autocast_enabled(DeviceType::kCPU), amp::get_autocast_dtype(DeviceType::kCPU),
            amp::is_autocast_enabled(DeviceType::kCUDA), amp::get_autocast_dtype(DeviceType::kCUDA),
            amp::is_autocast_cache_enabled()};
  }
};

class AutocastReplay {
 public:
  explicit AutocastReplay(const AutocastState& s) {
    // The library reopening the forward's regions is not a cast by hand (managed_precision.h).
    const InternalCastScope internal;
    cpu_.emplace(DeviceType::kCPU, s.cpu_dtype, s.cpu_enabled, s.cache_enabled);
    // A CUDA region was only enabled in the forward where a GPU could be used.
    if (s.cuda_enabled) cuda_.emplace(DeviceType::kCUDA, s.cuda_dtype, true, s.cache_enabled);
  }
  ~AutocastReplay() {
    cuda_.reset();  // innermost first
    cpu_.reset();
  }
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

 private:
  std::optional<amp::autocast> cpu_, cuda_;
};

// The generators' states at the first forward. Replaying sets them for the replay and puts the
// states they have at backward time back afterwards, so the streams go on as without
// checkpointing.
class RngStates {
 public:
  explicit RngStates(const CheckpointOptions& o) {
    if (!o.preserve_rng_state) return;
    add(&default_generator());
    for (Generator* g : o.generators)
      if (g != nullptr) add(g);
  }

  class Replay {
   public:
    explicit Replay(const RngStates& saved) {
      for (const auto& [gen, state] : saved.states_) {
        now_.emplace_back(gen, gen->state());
        gen->set_state(state);
      }
    }
    ~Replay() {
      for (const auto& [gen, state] : now_) gen->set_state(state);
    }
    Replay(const Replay&) = delete;
    Replay& operator=(const Replay&) = delete;

   private:
    std::vector<std::pair<Generator*, std::string>> now_;
  };

 private:
  void add(Generator* g) {
    for (const auto& s : states_)
      if (s.first == g) return;
    states_.emplace_back(g, g->state());
  }
  std::vector<std::pair<Generator*, std::string>> states_;
};

std::mutex& replay_hooks_mutex() {
  static std::mutex m;
  return m;
}

std::vector<ReplayStateHooks>& replay_hooks() {
  static std::vector<ReplayStateHooks> hooks;
  return hooks;
}

// What the registered hooks captured at the first forward, one entry per hook.
class OtherStates {
 public:
  OtherStates() {
    const std::lock_guard<std::mutex> lock(replay_hooks_mutex());
    for (const ReplayStateHooks& h : replay_hooks()) captured_.emplace_back(h, h.capture());
  }

  // The guards of one of the hooks (first_forward or replay) entered with what each captured;
  // they end the last entered first.
  class Guards {
   public:
    Guards(const OtherStates& saved, ReplayStateHooks::Guard ReplayStateHooks::*hook) {
      for (const auto& [hooks, captured] : saved.captured_)
        if (hooks.*hook) guards_.push_back((hooks.*hook)(captured));
    }
    ~Guards() {
      while (!guards_.empty()) guards_.pop_back();
    }
    Guards(const Guards&) = delete;
    Guards& operator=(const Guards&) = delete;

   private:
    std::vector<std::shared_ptr<void>> guards_;
  };

 private:
  std::vector<std::pair<ReplayStateHooks, std::shared_ptr<void>>> captured_;
};

bool any_requires_grad(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace

bool in_checkpoint() { return t_checkpoint_depth > 0; }

void register_replay_state(ReplayStateHooks hooks) {
  MANTISSA_CHECK(hooks.capture && hooks.replay, "register_replay_state",
                 "both hooks (capture and replay) must be set");
  const std::lock_guard<std::mutex> lock(replay_hooks_mutex());
  replay_hooks().push_back(std::move(hooks));
}

Tensor checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                  const CheckpointOptions& options) {
  MANTISSA_CHECK(static_cast<bool>(fn), "checkpoint", "the function to checkpoint is empty");
  const bool record = GradMode::is_enabled() &&
                      (any_requires_grad(inputs) || any_requires_grad(options.parameters));
  if (!record) {
    const CheckpointDepth depth;
    return fn(inputs);
  }
  const AutocastState autocast_state = AutocastState::now();
  auto rng = std::make_shared<const RngStates>(options);
  auto others = std::make_shared<const OtherStates>();
  // The inputs as the replay gets them: the same storage, no history (the replay's graph ends
  // at them, and the outer graph continues from this node's edges).
  std::vector<Tensor> saved;
  std::vector<bool> wants_grad;
  saved.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    saved.push_back(t.defined() ? t.detach() : Tensor());
    wants_grad.push_back(t.defined() && t.requires_grad());
  }
  Tensor out;
  {
    const CheckpointDepth depth;
    const NoGradGuard no_graph;
    const OtherStates::Guards first_forward(*others, &ReplayStateHooks::first_forward);
    out = fn(saved);
  }
  MANTISSA_CHECK(out.defined(), "checkpoint", "the checkpointed function returned no tensor");
  // A tensor of its own for the node (the function may return one of its inputs, which `saved`
  // holds: the node would then keep itself alive).
  out = out.detach();
  // Edges to the inputs and to the parameters: the parameters' gradients come from the replay's
  // own backward, but the edge makes this node run before anything else that feeds them.
  std::vector<Tensor> edges = inputs;
  edges.insert(edges.end(), options.parameters.begin(), options.parameters.end());
  const size_t n_edges = edges.size();
  return autograd::record(
      out, edges, saved, "CheckpointBackward",
      [fn, saved, wants_grad, autocast_state, rng, others, n_edges](const Tensor& grad_out) {
        std::vector<Tensor> replay_inputs;
        replay_inputs.reserve(saved.size());
        for (size_t i = 0; i < saved.size(); ++i) {
          Tensor t = saved[i].defined() ? saved[i].detach() : Tensor();
          if (wants_grad[i]) t.set_requires_grad(true);
          replay_inputs.push_back(t);
        }
        Tensor replayed;
        {
          const RngStates::Replay random(*rng);
          const CheckpointDepth depth;
          const autograd::RecomputeScope replay;
          const AutocastReplay autocast(autocast_state);
          const OtherStates::Guards other(*others, &ReplayStateHooks::replay);
          replayed = fn(replay_inputs);
        }
        std::vector<Tensor> grads(n_edges);
        if (!replayed.defined() || !replayed.requires_grad()) return grads;
        autograd::run_backward({replayed}, {grad_out}, /*retain_graph=*/false);
        for (size_t i = 0; i < replay_inputs.size(); ++i)
          if (wants_grad[i]) grads[i] = replay_inputs[i].grad();
        return grads;
      });
}

namespace {

// Adds what the Module form adds for `module`: its trainable parameters and the generators of
// its dropout layers.
void add_module_state(Module& module, CheckpointOptions& options) {
  for (const Tensor& p : module.parameters())
    if (p.requires_grad()) options.parameters.push_back(p);
  for (const auto& [name, m] : module.named_modules()) {
    if (const auto* d = dynamic_cast<const Dropout*>(m))
      options.generators.push_back(d->generator());
    if (const auto* a = dynamic_cast<const MultiheadAttention*>(m))
      options.generators.push_back(a->generator());
  }
}

}  // namespace

Tensor checkpoint(Module& module, const Tensor& input, CheckpointOptions options) {
  add_module_state(module, options);
  // The replay calls the module by reference, as torch.utils.checkpoint does: it must live
  // until backward.
  return checkpoint([&module](const std::vector<Tensor>& x) { return module.forward(x[0]); },
                    {input}, options);
}

Tensor checkpoint_sequential(Sequential& sequential, int64_t segments, const Tensor& input,
                             const CheckpointOptions& options) {
  const auto n = static_cast<int64_t>(sequential.size());
  MANTISSA_CHECK(segments >= 1 && segments <= n, "checkpoint_sequential",
                 "segments must be between 1 and the number of modules ({}), got {}", n, segments);
  const int64_t size = n / segments;
  Tensor x = input;
  int64_t start = 0;
  for (int64_t s = 0; s + 1 < segments; ++s, start += size) {
    std::vector<std::shared_ptr<Module>> run;
    CheckpointOptions segment_options = options;
    for (int64_t i = start; i < start + size; ++i) {
      run.push_back(sequential[static_cast<size_t>(i)]);
      add_module_state(*run.back(), segment_options);
    }
    x = checkpoint(
        [run](const std::vector<Tensor>& in) {
          Tensor y = in[0];
          for (const auto& m : run) y = m->forward(y);
          return y;
        },
        {x}, segment_options);
  }
  for (int64_t i = start; i < n; ++i) x = sequential[static_cast<size_t>(i)]->forward(x);
  return x;
}

}  // namespace mantissa::nn
