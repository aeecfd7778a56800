#pragma once
// What a checkpoint's or --save-weights file's metadata says of how its weights are stored,
// against its tensors, before a model is built from either (eval's --checkpoint, train's
// --resume): the recorded precision against the 4-bit, int8 and FP8 state the tensors hold, and
// hyper_parameters.quant-dtype against the precision plugin's compute dtype. A file where they
// disagree is damaged; trusting the metadata built other layers than the tensors fill, or
// computed in another dtype than the run that wrote it.
#include <string>

#include "mantissa/io/safetensors.h"

namespace mantissa::recipes {

// Throws mantissa::Error from `where` naming `path`, the metadata field and its value and the
// tensor that contradicts it, ending "the file is damaged: " + `advice`. Examples:
//   ck.safetensors: the trainer metadata's precision is 'fp4', but its tensors hold nf4 weights
//   ('model.h0.mlp.fc1.base_layer.weight.quant_state.bitsandbytes__nf4') without
//   double-quantized absmax, which precision nf4 writes; the file is damaged: use an earlier
//   checkpoint
// A file that records nothing to compare (no precision, no quantized tensors) passes.
void check_stored_format(const io::SafetensorsHeader& header, const std::string& path,
                         const char* where, const std::string& advice);

}  // namespace mantissa::recipes
