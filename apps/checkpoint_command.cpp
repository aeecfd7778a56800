#include "checkpoint_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "mantissa/core/error.h"
#include "mantissa/train/checkpoint/checkpoint.h"

namespace mantissa::app {

void add_checkpoint_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("checkpoint", "Work on checkpoint files");
  cmd->require_subcommand(1);
  CLI::App* consolidate = cmd->add_subcommand(
      "consolidate",
      "Write a sharded checkpoint (zero1/zero2 with --sharded-checkpoint: each rank's part of "
      "the optimizer state in a directory beside the file) as one ordinary checkpoint file, "
      "which train --resume, eval and --init-from read in one process or on any number of "
      "ranks");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  consolidate->add_option("CHECKPOINT", *in, "the sharded checkpoint's .safetensors file")
      ->required();
  consolidate->add_option("OUT", *out, "the checkpoint file to write")->required();
  consolidate->callback([in, out] {
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
