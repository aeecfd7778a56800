// The checkpoint file: one safetensors file (the reader/writer of src/io).
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/train/checkpoint.h"

namespace mantissa::train {

void save_checkpoint_file(const std::string& path, const CheckpointContents& contents) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  io::save_safetensors(path, contents.tensors, contents.metadata);
}

CheckpointContents load_checkpoint_file(const std::string& path) {
  MANTISSA_CHECK(std::filesystem::is_regular_file(path), "checkpoint",
                 "checkpoint file '{}' does not exist (ckpt_path / --resume)", path);
  io::SafetensorsFile file = io::load_safetensors(path);
  return {std::move(file.tensors), std::move(file.metadata)};
}

}  // namespace mantissa::train
