#pragma once
// Sharded checkpoints (docs/distributed.md, "Sharded checkpoints"): under zero1 / zero2 with
// sharded_checkpoints every rank writes its own part of the optimizer state, and no rank holds
// the whole. A checkpoint FILE.safetensors is then
//   FILE.safetensors             rank 0: the weights and the trainer metadata, as an ordinary
//                                checkpoint without optimizer state tensors, its metadata
//                                naming the shard directory ("mantissa.optimizer_shards")
//   FILE.safetensors.shards-XXXXXXXX/
//     index.json                 the world size, the shard files, each optimizer's partition
//                                (flat cuts and parameter shapes), the step
//     optimizer-R-of-N.safetensors   rank R's shard state, "optimizer.<i>.<key>" tensors, with
//                                checksums
// The save is atomic per checkpoint: the ranks write a new directory, agree that every rank
// has written its part, and only then rank 0 replaces FILE (temporary file, then rename), so a
// rank killed during a save leaves the previous FILE and the directory it names as they were.
// Reading puts the optimizer state back together as one process holds it, so a sharded
// checkpoint resumes on any number of ranks, or in one process, and consolidates into an
// ordinary file.
#include <string>
#include <vector>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/strategy.h"

namespace mantissa::train {

inline constexpr const char* kOptimizerShardsMetadataKey = "mantissa.optimizer_shards";

// Every rank with its part `shards` (Strategy::optimizer_state_shards): writes the shard
// directory, then rank 0 the weights file `path`. Ranks agree on a failure (a collective), and
// every rank then throws naming the rank that failed.
void save_sharded_checkpoint(Trainer& trainer, const std::string& path,
                             const std::vector<OptimizerStateShard>& shards);

// When `contents` (read from `path`) names a shard directory: checks the file's checksums,
// reads the shards, and replaces the name by the whole optimizer state (tensors and metadata,
// with fresh checksums). Throws naming the file for a missing or damaged part.
void assemble_sharded_checkpoint(CheckpointContents& contents, const std::string& path);

}  // namespace mantissa::train
