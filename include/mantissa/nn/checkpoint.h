#pragma once
// Activation checkpointing (torch.utils.checkpoint; Hugging Face's gradient_checkpointing):
// trade compute for memory. A checkpointed function runs its forward without recording a graph,
// so none of its intermediate activations are kept; the backward runs it again from its saved
// inputs, with the graph on, and backpropagates through that replay. A transformer block then
// holds one (B, T, E) input instead of a dozen tensors per layer until backward reaches it, for
// about one more forward of the block per step. docs/guide.md, "Activation checkpointing".
//
//   Tensor x = ...;
//   for (auto& block : blocks) x = nn::checkpoint(*block, x);   // instead of block->forward(x)
//
// What the replay restores so that it computes the same bits as the first forward (the
// gradients equal those of the unchecked run, bit for bit, where the ops are deterministic):
// - autocast: the regions' enabled flags, dtypes and cache flag of the first forward;
// - random numbers: the default generator's state, and those of `generators` (the Module form
//   adds every nn::Dropout's and nn::MultiheadAttention's own generator); the streams after the
//   step are as without checkpointing;
// - BatchNorm counts the batch in its running statistics in the first forward only;
// - the state of the layers above nn that register it (register_replay_state): the FP8
//   autocast region and recipe, with the replay's casts not counted again in the FP8 layers'
//   statistics (fp8/autocast.h), and under delayed scaling the scales the first forward's casts
//   used. The FP8 recipe whose replay cannot compute the first forward's values (mxfp4 with
//   stochastic rounding) refuses to run inside a checkpointed function
//   (fp8::Recipe::checkpoint_refusal).
//
// Without grad mode (evaluation), or when neither an input nor a listed parameter requires
// grad, the function simply runs. Multiple outputs are not supported: the function returns one
// Tensor. The output's graph is one node, "CheckpointBackward"; backward through it twice
// needs retain_graph as for any node.
#include <functional>
#include <memory>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"
#include "mantissa/nn/module.h"
#include "mantissa/nn/sequential.h"

namespace mantissa::nn {

struct CheckpointOptions {
  // Restore the generators' states for the replay (torch's preserve_rng_state), so dropout
  // draws the same masks. Off only for functions that draw no random numbers (saves copying
  // the states).
  bool preserve_rng_state = true;
  // Generators besides the default one that the function draws from.
  std::vector<Generator*> generators;
  // The trainable tensors the function reads besides its inputs (the parameters of the layers
  // it calls). They decide whether a graph is recorded at all when no input requires grad (a
  // frozen embedding in front of LoRA blocks); their gradients are accumulated by the replay's
  // backward. The Module form lists the module's own.
  std::vector<Tensor> parameters;
};

using CheckpointFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs fn(inputs) checkpointed. Undefined inputs are passed through as they are.
Tensor checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                  const CheckpointOptions& options = {});

// module.forward(input) checkpointed, with the module's parameters and its dropout layers'
// generators added to `options`.
Tensor checkpoint(Module& module, const Tensor& input, CheckpointOptions options = {});

// torch.utils.checkpoint.checkpoint_sequential: the modules of `sequential` split into
// `segments` runs of consecutive modules, size() / segments each and the rest in the last, as
// PyTorch splits them; each run is checkpointed but the last, which runs normally since its
// backward comes first. segments must be in [1, sequential.size()].
Tensor checkpoint_sequential(Sequential& sequential, int64_t segments, const Tensor& input,
                             const CheckpointOptions& options = {});

// True while a checkpointed function runs on this thread: its first forward or its replay.
bool in_checkpoint();

// State kept outside nn that a replay must see as its first forward saw it. `capture` runs at
// every checkpointed first forward that records a graph and returns what the replay needs;
// `first_forward` (optional) gets that around the first forward, for what only the forward's
// own ops know (the scales of the FP8 layers it runs), and returns a guard that ends with the
// forward; `replay` gets it around the replay and returns a guard whose destruction, when the
// replay ends, puts back the state of backward time. The layers above nn (fp8) register theirs
// once, before their first forward; the hooks then apply to every checkpoint in the process.
struct ReplayStateHooks {
  using Guard = std::function<std::shared_ptr<void>(const std::shared_ptr<void>& captured)>;
  std::function<std::shared_ptr<void>()> capture;
  Guard first_forward;
  Guard replay;
};
void register_replay_state(ReplayStateHooks hooks);

}  // namespace mantissa::nn
