// The checkpoint file: one safetensors file (the reader/writer of src/io). Builds without the
// io module fail at run time with a clear message instead of breaking the build.
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/train/checkpoint.h"

#if __has_include("mantissa/io/safetensors.h")
#include "mantissa/io/safetensors.h"
#define MANTISSA_HAS_SAFETENSORS 1
#endif

namespace mantissa::train {

void save_checkpoint_file(const std::string& path, const CheckpointContents& contents) {
#ifdef MANTISSA_HAS_SAFETENSORS
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  io::save_safetensors(path, contents.tensors, contents.metadata);
#else
  fail("checkpoint", "cannot write '{}': this build has no safetensors writer", path);
#endif
}

CheckpointContents load_checkpoint_file(const std::string& path) {
  MANTISSA_CHECK(std::filesystem::is_regular_file(path), "checkpoint",
                 "checkpoint file '{}' does not exist (ckpt_path / --resume)", path);
#ifdef MANTISSA_HAS_SAFETENSORS
  io::SafetensorsFile file = io::load_safetensors(path);
  return {std::move(file.tensors), std::move(file.metadata)};
#else
  fail("checkpoint", "cannot read '{}': this build has no safetensors reader", path);
#endif
}

}  // namespace mantissa::train
