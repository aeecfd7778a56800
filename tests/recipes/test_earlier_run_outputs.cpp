// An output directory that holds an earlier run's files is refused (recipes/earlier_run_outputs.h):
// what counts as its files, which --resume continues that run, and what the refusal says; the
// library's entry points (run_training, run_gpt_training, run_finetune) refuse as the commands
// do, before they read the data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "mantissa/io/output_path.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/finetune_run.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::error_of;

void touch(const std::string& path) { std::ofstream(path) << "x"; }

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string fixture(const std::string& name) { return testing::hf_finetune_fixture(name); }

std::string refusal(const std::string& dir, const std::string& resume = "", bool overwrite = false,
                    bool written_at_end = false) {
  return error_of([&] {
    refuse_earlier_run_outputs({{dir, "--checkpoint-dir", written_at_end}}, resume, overwrite,
                               "train");
  });
}

TEST(EarlierRunOutputs, MissingEmptyOrOnlyWriteProbesIsNoEarlierRun) {
  mantissa::testing::TempDir tmp;
  EXPECT_EQ(refusal(tmp.file("missing")), "");
  std::filesystem::create_directory(tmp.file("empty"));
  EXPECT_EQ(refusal(tmp.file("empty")), "");
  // Another rank's prepare_output_dir probing at that moment.
  touch(tmp.file("empty/.mantissa_write_probe.4242"));
  EXPECT_EQ(io::directory_entries(tmp.file("empty")), std::vector<std::string>{});
  EXPECT_EQ(refusal(tmp.file("empty")), "");
  touch(tmp.file("a_file"));  // not a directory: prepare_output_dir says so, not this check
  EXPECT_EQ(refusal(tmp.file("a_file")), "");
}

TEST(EarlierRunOutputs, NamesTheDirectoryFourEntriesAndTheWaysOut) {
  mantissa::testing::TempDir tmp;
  const std::string ck = tmp.file("ck");
  std::filesystem::create_directory(ck);
  for (const char* name : {"last.safetensors", "config.json", "epoch=1-step=8.safetensors",
                           "epoch=0-step=4.safetensors", ".hidden", "z.txt"}) {
    touch(ck + "/" + name);
  }
  EXPECT_EQ(io::directory_entries(ck),
            (std::vector<std::string>{".hidden", "config.json", "epoch=0-step=4.safetensors",
                                      "epoch=1-step=8.safetensors", "last.safetensors", "z.txt"}));
  EXPECT_EQ(refusal(ck),
            "[train] --checkpoint-dir '" + ck +
                "' holds .hidden, config.json, epoch=0-step=4.safetensors, "
                "epoch=1-step=8.safetensors and 2 more from an earlier run, which this run would "
                "overwrite; continue that run with --resume last, give a new or empty "
                "--checkpoint-dir, or pass --overwrite-output-dir to write into it anyway");
  std::filesystem::remove(ck + "/last.safetensors");
  EXPECT_NE(refusal(ck).find("continue that run with --resume and one of its checkpoint files"),
            std::string::npos);
  EXPECT_EQ(refusal(ck, "", /*overwrite=*/true), "");
}

TEST(EarlierRunOutputs, AResumeOfOneOfItsCheckpointsContinuesThatRun) {
  mantissa::testing::TempDir tmp;
  const std::string ck = tmp.file("ck");
  std::filesystem::create_directories(ck + "/sharded.shards");
  touch(ck + "/last.safetensors");
  EXPECT_EQ(refusal(ck, ck + "/last.safetensors"), "");
  EXPECT_EQ(refusal(tmp.file("./ck/"), tmp.file("ck/../ck/last.safetensors")), "");
  EXPECT_EQ(refusal(ck, ck + "/sharded.shards"), "");
  // Another run's checkpoint does not continue the run whose files these are.
  touch(tmp.file("other.safetensors"));
  const std::string other = tmp.file("other.safetensors");
  EXPECT_NE(refusal(ck, other).find("(--resume '" + other + "' is not one of its checkpoints)"),
            std::string::npos);
  // finetune's --output-dir without --resume: the way out is the run's own checkpoint.
  EXPECT_NE(refusal(ck, "", false, /*written_at_end=*/true)
                .find("continue the run that wrote them with --resume (a checkpoint of its "
                      "--checkpoint-dir)"),
            std::string::npos);
}

// A directory of files no run of ours writes is refused as not empty, without calling them an
// earlier run's; one file a run writes among them (config.json) makes it an earlier run's.
TEST(EarlierRunOutputs, OtherFilesAreNamedAsNotEmptyNotAsAnEarlierRun) {
  mantissa::testing::TempDir tmp;
  const std::string out = tmp.file("out");
  std::filesystem::create_directory(out);
  touch(out + "/README.txt");
  touch(out + "/notes.md");
  EXPECT_EQ(refusal(out, "", false, /*written_at_end=*/true),
            "[train] --checkpoint-dir '" + out +
                "' is not empty: it holds README.txt and notes.md; give a new or empty "
                "--checkpoint-dir, or pass --overwrite-output-dir to write into it anyway");
  EXPECT_EQ(refusal(out, "", /*overwrite=*/true), "");
  touch(out + "/config.json");
  EXPECT_NE(refusal(out).find("holds README.txt, config.json and notes.md from an earlier run"),
            std::string::npos);
  std::filesystem::remove(out + "/config.json");
  touch(out + "/adapter_model.safetensors");
  EXPECT_NE(refusal(out).find("from an earlier run"), std::string::npos);
}

// finetune's --output-dir and --merge-to, written at the run's end: a --resume writes into one
// that holds only files a fine-tune writes there when the resumed checkpoint records it as its
// run's, or records nothing (an older build's checkpoint).
TEST(EarlierRunOutputs, AResumeWritesOnlyIntoItsOwnRunsOutputs) {
  mantissa::testing::TempDir tmp;
  const std::string out = tmp.file("out");
  const std::string ck = tmp.file("ck/epoch=0-step=2.safetensors");
  const std::string other = tmp.file("other");
  std::filesystem::create_directory(out);
  touch(out + "/adapter_config.json");
  touch(out + "/adapter_model.safetensors");
  const auto at_end = [](const std::string& dir, const std::string& resume,
                         std::optional<std::string> own, const char* flag = "--output-dir") {
    return error_of([&] {
      refuse_earlier_run_outputs({{dir, flag, /*written_at_end=*/true, std::move(own)}}, resume,
                                 false, "finetune");
    });
  };
  EXPECT_EQ(at_end(out, ck, out), "");
  EXPECT_EQ(at_end(out, ck, tmp.file("./out/")), "");
  EXPECT_EQ(at_end(out, ck, std::nullopt), "");
  EXPECT_EQ(at_end(out, ck, other),
            "[finetune] --output-dir '" + out +
                "' holds adapter_config.json and adapter_model.safetensors from another run: the "
                "run --resume '" +
                ck + "' continues wrote its --output-dir to '" + other + "'; give --output-dir '" +
                other +
                "', a new or empty --output-dir, or pass --overwrite-output-dir to write into it "
                "anyway");
  EXPECT_EQ(at_end(out, ck, "", "--merge-to"),
            "[finetune] --merge-to '" + out +
                "' holds adapter_config.json and adapter_model.safetensors from another run: the "
                "run --resume '" +
                ck +
                "' continues had no --merge-to; give a new or empty --merge-to, or pass "
                "--overwrite-output-dir to write into it anyway");
  // Files no fine-tune writes there are no run's output, whatever the record says.
  touch(out + "/README.txt");
  touch(out + "/last.safetensors");
  const std::string not_written =
      "[finetune] --output-dir '" + out +
      "' holds README.txt and last.safetensors, which `mantissa finetune` does not write there: "
      "it is not the output of the run --resume '" +
      ck +
      "' continues; give a new or empty --output-dir, or pass --overwrite-output-dir to write "
      "into it anyway";
  EXPECT_EQ(at_end(out, ck, out), not_written);
  EXPECT_EQ(at_end(out, ck, std::nullopt), not_written);
  // Its checkpoints are the resumed run's when its --checkpoint-dir is this directory too.
  std::filesystem::remove(out + "/README.txt");
  EXPECT_EQ(at_end(out, out + "/last.safetensors", out), "");
  EXPECT_EQ(error_of([&] {
              refuse_earlier_run_outputs({{out, "--output-dir", true, other}}, ck,
                                         /*overwrite=*/true, "finetune");
            }),
            "");
}

// A C++ caller of the runs meets the commands' refusals, before the data is read (a missing
// data set or corpus would be the error otherwise), and the earlier run's files stay.
TEST(EarlierRunOutputs, TheTrainingRunsRefuseAsTheCommandDoes) {
  mantissa::testing::TempDir tmp;
  const std::string ck = tmp.file("ck");
  std::filesystem::create_directory(ck);
  write(ck + "/last.safetensors", "earlier weights");
  write(ck + "/config.json", "{\"model\": \"mlp\"}");
  const std::string message =
      "[train] --checkpoint-dir '" + ck +
      "' holds config.json and last.safetensors from an earlier run, which this run would "
      "overwrite; continue that run with --resume last, give a new or empty --checkpoint-dir, or "
      "pass --overwrite-output-dir to write into it anyway";
  TrainOptions o;
  o.quiet = true;
  o.checkpoint_dir = ck;
  o.data_dir = tmp.file("no_data");
  EXPECT_EQ(error_of([&] { run_training(o); }), message);
  GptOptions g;
  g.text = tmp.file("no_corpus.txt");
  EXPECT_EQ(error_of([&] { run_gpt_training(o, g); }), message);
  // --resume "last" is the checkpoint of that directory, as on the command line: no refusal of
  // the directory (the missing corpus is the error now).
  o.resume = "last";
  EXPECT_EQ(error_of([&] { run_gpt_training(o, g); }),
            "[TextCorpus] '" + g.text + "' does not exist");
  EXPECT_EQ(io::directory_entries(ck),
            (std::vector<std::string>{"config.json", "last.safetensors"}));
  // A metrics JSON file that holds an earlier run's numbers.
  o.checkpoint_dir = "";
  o.resume = "";
  o.metrics_json = tmp.file("m.json");
  write(o.metrics_json, "{}\n");
  const std::string metrics = "--metrics-json '" + o.metrics_json +
                              "' already exists (3 bytes), and this run would replace it; give a "
                              "new file, continue the run that wrote it with --resume, or pass "
                              "--overwrite-output-dir to replace it";
  EXPECT_EQ(error_of([&] { run_training(o); }), "[train] " + metrics);
  EXPECT_EQ(error_of([&] { run_gpt_training(o, g); }), "[train] " + metrics);
  EXPECT_EQ(read(o.metrics_json), "{}\n");
  EXPECT_EQ(read(ck + "/last.safetensors"), "earlier weights");
  EXPECT_EQ(read(ck + "/config.json"), "{\"model\": \"mlp\"}");
}

TEST(EarlierRunOutputs, RunFinetuneRefusesAsTheCommandDoes) {
  mantissa::testing::TempDir tmp;
  const std::string out = tmp.file("out");
  std::filesystem::create_directory(out);
  write(out + "/README.txt", "notes");
  TrainOptions o;
  o.quiet = true;
  o.quant.lora_rank = 4;
  FinetuneOptions f;
  f.model_dir = fixture("llama");
  f.data = tmp.file("no_data.jsonl");
  f.output_dir = out;
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --output-dir '" + out +
                "' is not empty: it holds README.txt; give a new or empty --output-dir, or pass "
                "--overwrite-output-dir to write into it anyway");
  f.merge_to = out + "/merged";
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --merge-to '" + out + "/merged' lies inside --output-dir '" + out +
                "': the merged model's files and the adapter's would mix; give --output-dir and "
                "--merge-to a directory each, neither inside the other (--overwrite-output-dir "
                "does not allow this)");
  f.merge_to = "";
  f.output_dir = tmp.file("new_out");
  o.metrics_json = tmp.file("m.json");
  write(o.metrics_json, "{}\n");
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --metrics-json '" + o.metrics_json +
                "' already exists (3 bytes), and this run would replace it; give a new file, "
                "continue the run that wrote it with --resume, or pass --overwrite-output-dir to "
                "replace it");
  EXPECT_FALSE(std::filesystem::exists(f.output_dir));
  EXPECT_EQ(io::directory_entries(out), std::vector<std::string>{"README.txt"});
  EXPECT_EQ(read(out + "/README.txt"), "notes");
}

}  // namespace
}  // namespace mantissa::recipes
