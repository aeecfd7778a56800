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
  // Reached from --resume, --init-from, eval's --checkpoint and Trainer::fit's ckpt_path: the
  // message names the path only, which the user just gave.
  MANTISSA_CHECK(std::filesystem::exists(path), "checkpoint", "checkpoint file '{}' does not exist",
                 path);
  if (!std::filesystem::is_regular_file(path)) {
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    fail("checkpoint", "'{}' is not a file; give a checkpoint such as {}/last.safetensors", path,
         dir);
  }
  io::SafetensorsFile file = io::load_safetensors(path);
  return {std::move(file.tensors), std::move(file.metadata)};
}

}  // namespace mantissa::train
