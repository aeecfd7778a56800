#pragma once
// Optimizers by name (the command line's --optimizer, --optim-bits-32), built the same way
// for every model and precision (docs/optimizers.md).
#include <memory>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::optim {

struct OptimizerChoice {
  // "adamw" (default), "adam", "sgd", "adamw8bit" or "adam8bit".
  std::string name = "adamw";
  double lr = 1e-3;
  double weight_decay = 1e-2;  // AdamW/AdamW8bit: decoupled; Adam/SGD: L2; Adam8bit: decoupled
  double momentum = 0.9;       // sgd only
  // float16/bfloat16 parameters (see HalfPrecisionOptions in optimizer.h); the 8-bit optimizers use
  // master_weights only.
  bool master_weights = false;
  bool stochastic_rounding = false;
  bool fp32_state = false;
  // 8-bit optimizers: parameters whose name contains one of these keep 32-bit state.
  std::vector<std::string> optim_bits_32;
  // 8-bit optimizers: every nn::Embedding's weight keeps 32-bit state (the GPT's default).
  bool embeddings_32bit = false;
};

// The valid names, for messages: "adamw, adam, sgd, adamw8bit, adam8bit".
const char* optimizer_names();
// Throws listing the valid names when `name` is not one of them; `where` labels the message
// with the command that was run.
void check_optimizer_name(const std::string& name, const char* where = "train");
bool is_8bit_optimizer(const std::string& name);

// Builds the optimizer over model's parameters.
std::shared_ptr<Optimizer> make_optimizer(const OptimizerChoice& choice, nn::Module& model);

// Splits "a,b,c" into names, each trimmed of spaces and tabs ("q_proj, v_proj" names v_proj, as
// --fp8-exclude's names are read); empty items are dropped.
std::vector<std::string> split_names(const std::string& list);

}  // namespace mantissa::optim
