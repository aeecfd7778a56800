#pragma once
// The sizes of a reference model that a file's tensors show, read from their names and shapes
// alone (nothing is built): what `mantissa eval` checks a file's recorded hyperparameters
// against before it builds the model they describe (model_hparams.h). Names may carry any
// prefix ("model." in Trainer checkpoints, none in --save-weights files); LoRA's
// "base_layer." and quantized weights do not hide a size, since biases and embeddings are
// stored as they are.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/shape.h"

namespace mantissa::recipes {

// The shapes of a file's tensors, by name.
using TensorShapes = std::map<std::string, Shape>;

// The output sizes of an MLP's Linear layers in order, from their biases ("net.<k>.bias", or
// "net.<k>.base_layer.bias" under LoRA): {256, 10} for --hidden 256. Empty when there are none.
std::vector<int64_t> mlp_layer_outputs(const TensorShapes& shapes);

// The GPT's width (the columns of wte.weight), context (the rows of wpe.weight) and layers (the
// blocks h<i>), each nullopt when the file does not show it.
struct GptSizes {
  std::optional<int64_t> width, context, layers;
};
GptSizes gpt_sizes(const TensorShapes& shapes);

// The rank of the LoRA adapters a file holds: the rows of its first "<layer>.lora_A.weight"
// (in name order) and that tensor's name; nullopt when it holds no adapters.
struct LoraRankInFile {
  std::string tensor;
  int64_t rank = 0;
};
std::optional<LoraRankInFile> lora_rank_in_file(const TensorShapes& shapes);

// The rows of the FP8 layers' amax histories ("<layer>.fp8_amax_history", [rows, 3]): the
// --fp8-amax-history-len of the run that saved them; nullopt when the file holds no FP8 layer.
std::optional<int64_t> fp8_amax_history_rows(const TensorShapes& shapes);

// The first FP8 state tensor ("<layer>.fp8_scale" or "<layer>.fp8_amax_history") inside the
// module `name` (a qualified name from the model's root, "h0" or "h1.mlp"; the "model." prefix
// of a Trainer checkpoint's tensors is skipped), "" when there is none: a module the run kept
// out of FP8 (--fp8-exclude) holds none.
std::string fp8_state_within(const TensorShapes& shapes, const std::string& name);

}  // namespace mantissa::recipes
