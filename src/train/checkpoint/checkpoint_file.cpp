// The checkpoint file: one safetensors file (the reader/writer of src/io).
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_checksums.h"
#include "train/checkpoint/sharded_checkpoint.h"

namespace mantissa::train {

void save_checkpoint_file(const std::string& path, const CheckpointContents& contents) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::map<std::string, std::string> metadata = contents.metadata;
  metadata[kChecksumsMetadataKey] = checkpoint_checksums(contents);
  io::save_safetensors(path, contents.tensors, metadata);
}

namespace {

// Reached from --resume, --init-from, eval's --checkpoint and Trainer::fit's ckpt_path: the
// message names the path only, which the user just gave.
void check_checkpoint_path(const std::string& path) {
  MANTISSA_CHECK(std::filesystem::exists(path), "checkpoint", "checkpoint file '{}' does not exist",
                 path);
  if (std::filesystem::is_directory(path)) {
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    fail("checkpoint", "'{}' is a directory; give a checkpoint such as {}/last.safetensors", path,
         dir);
  }
  // A device, a pipe or a socket: nothing that holds a checkpoint.
  MANTISSA_CHECK(std::filesystem::is_regular_file(path), "checkpoint",
                 "'{}' is not a regular file; give a checkpoint (.safetensors) that mantissa "
                 "train wrote",
                 path);
}

}  // namespace

CheckpointContents load_checkpoint_file(const std::string& path) {
  check_checkpoint_path(path);
  io::SafetensorsFile file = io::load_safetensors(path);
  warn_if_no_checksums(file.metadata, path);
  CheckpointContents contents{std::move(file.tensors), std::move(file.metadata)};
  assemble_sharded_checkpoint(contents, path);
  return contents;
}

io::SafetensorsHeader read_checkpoint_header(const std::string& path) {
  check_checkpoint_path(path);
  return io::read_safetensors_header(path);
}

}  // namespace mantissa::train
