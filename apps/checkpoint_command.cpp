#include "checkpoint_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "mantissa/core/error.h"
#include "mantissa/train/checkpoint/checkpoint.h"

namespace mantissa::app {

namespace {

// The weights file CHECKPOINT stands for: itself; for a shard directory
// (FILE.shards-XXXXXXXX) FILE beside it; for another directory its last.safetensors.
std::string checkpoint_file_of(std::string path) {
  namespace fs = std::filesystem;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (!fs::is_directory(path)) return path;
  const std::string name = fs::path(path).filename().string();
  const size_t at = name.rfind(".shards-");
  if (at != std::string::npos && at > 0) {
    const fs::path file = fs::path(path).parent_path() / name.substr(0, at);
    MANTISSA_CHECK(fs::is_regular_file(file), "checkpoint consolidate",
                   "{} is the shard directory of {}, which is missing: the optimizer shards "
                   "alone hold no weights",
                   path, file.string());
    return file.string();
  }
  const std::string last = path + "/last.safetensors";
  MANTISSA_CHECK(fs::is_regular_file(last), "checkpoint consolidate",
                 "{} is a directory without last.safetensors: give the checkpoint's "
                 ".safetensors file",
                 path);
  return last;
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("checkpoint", "Work on checkpoint files");
  cmd->require_subcommand(1);
  CLI::App* consolidate = cmd->add_subcommand(
      "consolidate",
      "Write a sharded checkpoint (zero1/zero2/fsdp with --sharded-checkpoint: each rank's part of "
      "the optimizer state in a directory beside the file) as one ordinary checkpoint file, "
      "which train --resume, eval and --init-from read in one process or on any number of "
      "ranks");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  consolidate
      ->add_option("CHECKPOINT", *in,
                   "the sharded checkpoint: its .safetensors file, its shard directory, or a "
                   "--checkpoint-dir (its last.safetensors)")
      ->required();
  consolidate->add_option("OUT", *out, "the checkpoint file to write")->required();
  consolidate->callback([in, out] {
    *in = checkpoint_file_of(*in);
    std::error_code ec;
    MANTISSA_CHECK(!std::filesystem::equivalent(*in, *out, ec), "checkpoint consolidate",
                   "OUT is CHECKPOINT itself ({}): give another file, the sharded checkpoint "
                   "stays as it is",
                   *out);
    train::consolidate_checkpoint(*in, *out);
    fmt::print("wrote {} (the optimizer state put together from its ranks' parts)\n", *out);
  });
}

}  // namespace mantissa::app
