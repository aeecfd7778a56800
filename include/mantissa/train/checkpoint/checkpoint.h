#pragma once
// Checkpoints: everything a run needs to continue bit for bit, as ONE safetensors file.
//   tensors:  "model.<name>"            the module's state_dict (parameters and buffers)
//             "optimizer.<i>.<key>"     optimizer i's state tensors ("state.<j>.exp_avg", ...)
//             "trainer.step_losses"     float64, the loss of every optimizer step so far
//   metadata: "mantissa.trainer"        JSON: format version, epoch, global_step,
//             batches_in_epoch (position in the data), precision, optimizer meta, precision
//             plugin state (the GradScaler's state_dict under "MixedPrecision"), LR schedulers,
//             RNG (the default generator), callback states, callback metrics, "run" (the
//             RunConfig a resume is checked against) and "module" (on_save_checkpoint's state).
// Restoring validates everything against the trainer's model and optimizer first and only then
// changes them, so a bad file leaves the run as it was.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/tensor.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/nn/module.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train {

class Precision;
class Trainer;

inline constexpr const char* kCheckpointMetadataKey = "mantissa.trainer";
inline constexpr int kCheckpointFormatVersion = 1;

struct CheckpointContents {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

// The trainer's current state (tensors are copies: later steps do not change them).
// optimizer_states: the optimizers' complete states when they are sharded over the ranks
// (Strategy::complete_optimizer_states); empty: each optimizer's own state_dict().
CheckpointContents collect_checkpoint(
    Trainer& trainer, const std::vector<optim::OptimizerState>& optimizer_states = {});
// Restores a collected state into the trainer's module, optimizer, plugin, schedulers,
// callbacks, RNG and position. `source` names the file in error messages. Weights saved in
// another precision are converted, with a warning. Throws mantissa::Error, changing nothing, on
// any mismatch (missing or extra keys, shapes, dtypes that do not fit the saved precision).
void restore_checkpoint(Trainer& trainer, const CheckpointContents& contents,
                        const std::string& source);

// One safetensors file, written atomically (temporary file, then rename).
void save_checkpoint_file(const std::string& path, const CheckpointContents& contents);
// Reads a checkpoint; a missing or corrupt file throws naming the file. A sharded checkpoint
// (its ranks' optimizer state in a directory beside the file, sharded_checkpoint.cpp) comes
// back whole: the optimizer state put back together, as one process would have saved it.
CheckpointContents load_checkpoint_file(const std::string& path);
// Removes a checkpoint file and, for a sharded one, its directory of optimizer-state shards.
void remove_checkpoint_file(const std::string& path);
// `mantissa checkpoint consolidate`: writes checkpoint `in` (sharded or not) as one ordinary
// checkpoint file `out`.
void consolidate_checkpoint(const std::string& in, const std::string& out);
// A checkpoint's tensor names, dtypes and shapes and its metadata, without reading the tensors
// (for what a command must know before it builds a model); the same checks of the path and of
// the header as load_checkpoint_file.
io::SafetensorsHeader read_checkpoint_header(const std::string& path);

// Loads only the weights ("model.*" tensors) of a checkpoint, or of a weights file that uses
// the same names (`mantissa train --save-weights`), into `module`: every key must match and
// every shape fit; values are converted to the module's dtypes. Used by Trainer::validate /
// test with a ckpt_path (Lightning's trainer.test(ckpt_path=...)). Throws naming the file.
// With `plugin`: weights saved in another precision than the plugin's are converted to its
// parameter dtype, with the warning a resume gives.
void load_checkpoint_weights(nn::Module& module, const std::string& path,
                             const Precision* plugin = nullptr);

}  // namespace mantissa::train
