// `mantissa eval` of a checkpoint whose recorded sizes its own tensors contradict: a damaged
// "hidden": "999999,999999" (a 784-999999-999999-10 MLP, about 1.5 GiB) is an error naming the
// key before anything is built.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval_command.h"
#include "mantissa/core/allocator.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::app {
namespace {

TEST(EvalCommand, RecordedSizesTheTensorsContradictAreRefusedBeforeBuilding) {
  mantissa::testing::TempDir dir;
  const std::string path = dir.file("damaged.safetensors");
  // The weights of an MLP 784-256-10, as `mantissa train` saves them.
  const io::NamedTensors tensors = {{"model.net.0.weight", zeros({256, 784})},
                                    {"model.net.0.bias", zeros({256})},
                                    {"model.net.2.weight", zeros({10, 256})},
                                    {"model.net.2.bias", zeros({10})}};
  const nlohmann::json meta = {
      {"precision", "32-true"},
      {"hyper_parameters", {{"model", "mlp"}, {"hidden", "999999,999999"}, {"lora-rank", 0}}}};
  io::save_safetensors(path, tensors, {{train::kCheckpointMetadataKey, meta.dump()}});

  CLI::App app;
  add_eval_command(app);
  reset_peak_memory_stats();
  const int64_t before = max_memory_allocated();
  const std::string err =
      mantissa::testing::error_of([&] { app.parse("eval --checkpoint " + path, false); });
  EXPECT_EQ(err, "[eval] " + path +
                     ": hyper_parameters.hidden is 999999,999999, but the file's tensors are those "
                     "of hidden '256' (its layers' biases have 256, 10 outputs); the file is "
                     "damaged: pass --hidden as trained");
  // Nothing was built: the file's tensors (under 1 MiB) are all the memory it took.
  EXPECT_LT(max_memory_allocated() - before, int64_t{4} << 20);
}

// An nf4 LoRA checkpoint whose recorded lora-rank its adapters contradict: eval said "but
// --lora-rank is 64", a flag nobody gave. It is the record that is damaged, and said so.
TEST(EvalCommand, RecordedLoraRankTheAdaptersContradictIsRefusedNamingBoth) {
  mantissa::testing::TempDir dir;
  const std::string path = dir.file("lora.safetensors");
  const io::NamedTensors tensors = {{"model.net.0.base_layer.weight", zeros({256, 784})},
                                    {"model.net.0.base_layer.bias", zeros({256})},
                                    {"model.net.0.lora_A.weight", zeros({8, 784})},
                                    {"model.net.0.lora_B.weight", zeros({256, 8})},
                                    {"model.net.2.weight", zeros({10, 256})},
                                    {"model.net.2.bias", zeros({10})}};
  for (const int rank : {64, -1}) {
    const nlohmann::json meta = {
        {"precision", "32-true"},
        {"hyper_parameters", {{"model", "mlp"}, {"hidden", "256"}, {"lora-rank", rank}}}};
    io::save_safetensors(path, tensors, {{train::kCheckpointMetadataKey, meta.dump()}});
    CLI::App app;
    add_eval_command(app);
    EXPECT_EQ(mantissa::testing::error_of([&] { app.parse("eval --checkpoint " + path, false); }),
              "[eval] " + path + ": hyper_parameters.lora-rank is " + std::to_string(rank) +
                  (rank > 0 ? ", but 'model.net.0.lora_A.weight' has rank 8 (its rows)"
                            : ", but a LoRA rank is 0 (no adapters) or more") +
                  "; the file is damaged: pass --lora-rank as trained");
  }
}

}  // namespace
}  // namespace mantissa::app
