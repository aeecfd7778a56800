// A fine-tune's checkpoint records its run (recipes/finetune_record.h): what it records, how an
// older one is told by its tensor names, and the refusals of train's --resume of a fine-tune's
// checkpoint, finetune's --resume of train's, and of a fine-tune of another architecture; the
// fine-tune runs on the tiny Llama of tests/fixtures/hf/finetune.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mantissa/core/warning.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/finetune_record.h"
#include "mantissa/recipes/finetune_run.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/tiny_gpt.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::error_of;
using mantissa::testing::TempDir;

std::string fixture(const std::string& name) { return testing::hf_finetune_fixture(name); }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string canonical(const std::string& path) { return fs::weakly_canonical(path).string(); }

io::SafetensorsHeader header_with(std::vector<std::string> names) {
  io::SafetensorsHeader h;
  for (std::string& n : names) h.tensors.push_back({.name = std::move(n)});
  return h;
}

TEST(FinetuneRecord, RecordsTheTaskTheModelAndTheOutputsAsAbsolutePaths) {
  const std::string cwd = fs::current_path().string();
  EXPECT_EQ(finetune_hparams("LlamaForCausalLM", "m/./", "out", ""),
            (nlohmann::json{{"task", "finetune"},
                            {"architecture", "LlamaForCausalLM"},
                            {"model_dir", cwd + "/m/"},
                            {"output_dir", cwd + "/out"}}));
  const nlohmann::json j = finetune_hparams("GPT2LMHeadModel", "/a/b/../m", "/o", "/o2");
  EXPECT_EQ(j.at("model_dir"), "/a/m");
  EXPECT_EQ(j.at("merge_to"), "/o2");
  const std::optional<FinetuneRecord> r = finetune_record(header_with({"w"}), j);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->recorded);
  EXPECT_EQ(r->architecture, "GPT2LMHeadModel");
  EXPECT_EQ(r->model_dir, "/a/m");
  EXPECT_EQ(r->output_dir, "/o");
  EXPECT_EQ(r->merge_to, "/o2");
  EXPECT_EQ(describe_finetune_checkpoint(*r),
            "a checkpoint of `mantissa finetune` (GPT2LMHeadModel from '/a/m')");
}

// Before the record: a Hugging Face causal LM's tensor names; no model of train has them.
TEST(FinetuneRecord, AnOlderCheckpointIsToldByItsTensorNames) {
  for (const char* name : {"model.model.embed_tokens.weight", "model.transformer.wte.weight"}) {
    const std::optional<FinetuneRecord> r =
        finetune_record(header_with({"model.lm_head.weight", name}), nlohmann::json::object());
    ASSERT_TRUE(r.has_value()) << name;
    EXPECT_FALSE(r->recorded);
    EXPECT_EQ(r->model_dir, "");
  }
  EXPECT_EQ(describe_finetune_checkpoint(FinetuneRecord{}),
            "a `mantissa finetune` checkpoint or output (a Hugging Face language model's "
            "weights)");
  // train's GPT: "model.wte.weight" is not GPT-2's transformer.wte.
  const nlohmann::json gpt = {{"model", "gpt"}, {"layers", 1}};
  EXPECT_FALSE(finetune_record(header_with({"model.wte.weight"}), gpt).has_value());
  EXPECT_EQ(describe_other_checkpoint(gpt), "a checkpoint of `mantissa train --model gpt`");
  EXPECT_EQ(describe_other_checkpoint(nlohmann::json::object()),
            "no fine-tune's checkpoint (it records no `mantissa finetune` run and holds no "
            "Hugging Face language model's weights)");
  // Another task's record decides over the tensor names.
  EXPECT_FALSE(finetune_record(header_with({"model.model.embed_tokens.weight"}),
                               {{"task", "something else"}})
                   .has_value());
}

// A QLoRA-shaped fine-tune of the tiny Llama: 2 steps, a checkpoint at step 2 in `ck`.
void tiny_finetune(TrainOptions& o, FinetuneOptions& f, const TempDir& dir) {
  o.quiet = true;
  o.batch_size = 8;  // finetune's defaults (apps/finetune_command.cpp)
  o.lr = 2e-4;
  o.weight_decay = 0;
  o.quant.lora_rank = 4;
  o.quant.lora_alpha = 32;
  o.every_n_train_steps = 2;
  o.checkpoint_dir = dir.file("ck");
  f.model_dir = fixture("llama");
  f.data = fixture("qa.jsonl");
  f.output_dir = dir.file("out");
  f.block_size = 32;
  f.max_steps = 2;
}

// train's tiny GPT over the fixtures' corpus (its run options in o).
GptOptions tiny_gpt(TrainOptions& o) {
  o.model = "gpt";
  o.batch_size = 4;
  o.quiet = true;
  GptOptions g = mantissa::testing::tiny_gpt(fixture("corpus.txt"));
  g.max_steps = 2;
  return g;
}

TEST(FinetuneRecord, EachCommandResumesOnlyItsOwnCheckpoints) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  run_finetune(o, f);
  const std::string ck = dir.file("ck/last.safetensors");
  const io::SafetensorsHeader header = train::read_checkpoint_header(ck);
  const nlohmann::json hparams = recorded_model_hparams(header, ck, "test");
  // The adapters' settings too, which finetune's --resume checks (check_resumed_lora).
  EXPECT_EQ(hparams, (nlohmann::json{{"task", "finetune"},
                                     {"architecture", "LlamaForCausalLM"},
                                     {"model_dir", canonical(fixture("llama"))},
                                     {"output_dir", canonical(dir.file("out"))},
                                     {"lora-rank", o.quant.lora_rank},
                                     {"lora-alpha", o.quant.lora_alpha},
                                     {"lora-dropout", o.quant.lora_dropout}}));

  // train cannot continue it.
  TrainOptions t;
  GptOptions g = tiny_gpt(t);
  t.resume = ck;
  EXPECT_EQ(error_of([&] { run_gpt_training(t, g); }),
            "[--resume] '" + ck +
                "' is a checkpoint of `mantissa finetune` (LlamaForCausalLM from '" +
                canonical(fixture("llama")) +
                "'), which `mantissa train` cannot continue: continue it with `mantissa finetune "
                "--model-dir '" +
                canonical(fixture("llama")) + "' --resume '" + ck +
                "'` and that run's other flags, or give a checkpoint of `mantissa train`");

  // A fine-tune of GPT-2 cannot continue a fine-tune of the Llama.
  TrainOptions o2;
  FinetuneOptions f2;
  tiny_finetune(o2, f2, dir);
  f2.model_dir = fixture("gpt2");
  f2.output_dir = dir.file("out_gpt2");
  o2.checkpoint_dir = "";
  o2.resume = ck;
  EXPECT_EQ(error_of([&] { run_finetune(o2, f2); }),
            "[finetune] --resume '" + ck +
                "' continues a fine-tune of a LlamaForCausalLM (--model-dir '" +
                canonical(fixture("llama")) + "'), but --model-dir '" + fixture("gpt2") +
                "' holds a GPT2LMHeadModel: give the --model-dir of the run that wrote the "
                "checkpoint");
  EXPECT_FALSE(fs::exists(dir.file("out_gpt2")));

  // finetune cannot continue train's checkpoint, and says so before it loads the model.
  TrainOptions t2;
  GptOptions g2 = tiny_gpt(t2);
  t2.checkpoint_dir = dir.file("gpt_ck");
  run_gpt_training(t2, g2);
  const std::string gpt_ck = dir.file("gpt_ck/last.safetensors");
  TrainOptions o3;
  FinetuneOptions f3;
  tiny_finetune(o3, f3, dir);
  f3.output_dir = dir.file("out3");
  o3.checkpoint_dir = "";
  o3.resume = gpt_ck;
  f3.data = dir.file("no_data.jsonl");  // not read: the refusal comes first
  EXPECT_EQ(error_of([&] { run_finetune(o3, f3); }),
            "[finetune] --resume '" + gpt_ck +
                "' is a checkpoint of `mantissa train --model gpt`, not a fine-tune's: finetune "
                "continues only the checkpoints of a `mantissa finetune` run (its "
                "--checkpoint-dir); give one of those, or continue that run with the command "
                "that wrote it");
  EXPECT_FALSE(fs::exists(dir.file("out3")));
}

// A fine-tune's checkpoint from before the record (its hyper_parameters left out, as those
// builds wrote it): train still refuses it by its tensor names, and finetune resumes it.
TEST(FinetuneRecord, AnOlderFineTunesCheckpointIsToldByItsTensors) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  f.max_steps = 4;
  run_finetune(o, f);
  train::CheckpointContents contents =
      train::load_checkpoint_file(dir.file("ck/epoch=0-step=2.safetensors"));
  nlohmann::json meta = nlohmann::json::parse(contents.metadata.at(train::kCheckpointMetadataKey));
  ASSERT_EQ(meta.erase("hyper_parameters"), 1u);
  contents.metadata[train::kCheckpointMetadataKey] = io::dump_json(meta);
  const std::string older = dir.file("older.safetensors");
  train::save_checkpoint_file(older, contents);

  TrainOptions t;
  GptOptions g = tiny_gpt(t);
  t.resume = older;
  EXPECT_EQ(error_of([&] { run_gpt_training(t, g); }),
            "[--resume] '" + older +
                "' is a `mantissa finetune` checkpoint or output (a Hugging Face language "
                "model's weights), which `mantissa train` cannot continue: continue it with "
                "`mantissa finetune --model-dir DIR --resume '" +
                older + "'` and that run's other flags, or give a checkpoint of `mantissa train`");

  TrainOptions o2;
  FinetuneOptions f2;
  tiny_finetune(o2, f2, dir);
  o2.checkpoint_dir = "";
  o2.every_n_train_steps = 0;
  o2.resume = older;
  f2.max_steps = 4;
  f2.output_dir = dir.file("out2");
  const TrainMetrics m = run_finetune(o2, f2);
  // The unbroken run's adapter, bit for bit.
  EXPECT_EQ(read(dir.file("out2/adapter_model.safetensors")),
            read(dir.file("out/adapter_model.safetensors")));
  EXPECT_EQ(m.steps, 4);
}

// A resumed fine-tune whose --model-dir is another directory than the one its checkpoint
// records (a copy of the model, or the same model elsewhere) runs, and says where its weights,
// config and tokenizer come from; the recorded directory says nothing.
TEST(FinetuneRecord, ResumingAgainstAnotherModelDirWarns) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  f.max_steps = 4;
  run_finetune(o, f);
  const std::string ck = dir.file("ck/epoch=0-step=2.safetensors");
  const std::string copy = dir.file("llama_copy");
  fs::copy(fixture("llama"), copy, fs::copy_options::recursive);

  const auto resumed_warnings = [&](const std::string& model_dir, const std::string& out) {
    TrainOptions o2;
    FinetuneOptions f2;
    tiny_finetune(o2, f2, dir);
    o2.checkpoint_dir = "";
    o2.every_n_train_steps = 0;
    o2.resume = ck;
    f2.max_steps = 4;
    f2.model_dir = model_dir;
    f2.output_dir = dir.file(out);
    WarningRecorder recorder;
    EXPECT_EQ(run_finetune(o2, f2).steps, 4);
    return recorder.messages();
  };
  EXPECT_EQ(resumed_warnings(copy, "out_copy"),
            std::vector<std::string>{
                "--resume '" + ck + "' continues a fine-tune of --model-dir '" +
                canonical(fixture("llama")) + "', and this run's is '" + copy +
                "' (a LlamaForCausalLM too): the weights come from the checkpoint, config.json "
                "and the tokenizer from '" +
                copy + "'"});
  EXPECT_EQ(resumed_warnings(fixture("llama"), "out_same"), std::vector<std::string>{});
}

}  // namespace
}  // namespace mantissa::recipes
