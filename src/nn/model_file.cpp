#include "mantissa/nn/model_file.h"

#include "mantissa/io/safetensors.h"

namespace mantissa::nn {

void save_model(const Module& module, const std::string& path,
                const std::map<std::string, std::string>& metadata) {
  io::NamedTensors tensors;
  for (const auto& [name, t] : module.state_dict()) tensors.emplace_back(name, t);
  io::save_safetensors(path, tensors, metadata);
}

LoadResult load_model(Module& module, const std::string& path, bool strict) {
  io::SafetensorsFile file = io::load_safetensors(path);
  StateDict state;
  for (auto& [name, t] : file.tensors) state.insert(name, std::move(t));
  return module.load_state_dict(state, strict);
}

}  // namespace mantissa::nn
