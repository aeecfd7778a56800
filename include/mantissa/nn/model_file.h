#pragma once
// A module's state in a safetensors file in one call, as safetensors.torch.save_model /
// load_model: the state_dict() (parameters and persistent buffers, in their order and dtypes),
// optional string metadata. The file reads back into any module with the same keys; it is a
// plain safetensors file (docs/checkpoints.md), readable by the Python safetensors package.
#include <map>
#include <string>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

// Writes module.state_dict() to `path` (atomically, io::save_safetensors).
void save_model(const Module& module, const std::string& path,
                const std::map<std::string, std::string>& metadata = {});

// Loads `path` into `module` with load_state_dict(strict): with strict, a missing or unexpected
// key or a shape that does not match is an error naming it, and nothing is changed. Returns the
// keys strict=false skipped.
LoadResult load_model(Module& module, const std::string& path, bool strict = true);

}  // namespace mantissa::nn
