// --init-from against the hyperparameters its file records (mantissa/recipes/init_from_check.h):
// what the tensors' shapes cannot show (a GPT's --heads) must match the run's flags, by eval's
// rules.
#include <gtest/gtest.h>

#include <string>

#include "mantissa/core/warning.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/stored_format_check.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

// A --save-weights file of a GPT recording `hparams`.
std::string weights_file(const TempDir& dir, const nlohmann::json& hparams) {
  const std::string path = dir.file("gpt.safetensors");
  io::save_safetensors(
      path, {{"model.wpe.weight", zeros({16, 32}, kFloat32)}},
      {{"precision", "32-true"}, {"model", "gpt"}, {"hyper_parameters", hparams.dump()}});
  return path;
}

TEST(InitFromCheck, RecordedHeadsMustMatchTheRun) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  o.quant.init_from = weights_file(dir, {{"model", "gpt"},
                                         {"layers", 1},
                                         {"width", 32},
                                         {"heads", 4},
                                         {"context", 16},
                                         {"text", "corpus.txt"},
                                         {"lora-rank", 0}});
  GptOptions g;
  g.layers = 1;
  g.width = 32;
  g.context = 16;
  g.heads = 2;
  expect_error(
      [&] { check_init_from(o, g); },
      {"[--init-from]", "was trained with --heads 4, but --heads is 2 here", "pass --heads 4"});
  g.heads = 4;
  g.text = "another.txt";  // another corpus is what fine-tuning is for
  o.quant.lora_rank = 8;
  EXPECT_NO_THROW(check_init_from(o, g));
  // An image run: --model is named first.
  TrainOptions mlp;
  mlp.quant.init_from = o.quant.init_from;
  expect_error([&] { check_init_from(mlp); },
               {"[--init-from]", "was trained with --model gpt, but --model is mlp here"});
}

TEST(InitFromCheck, DamagedOrMissingRecordsAreLeftToTheLoad) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  GptOptions g;
  // A value of the wrong type, one the tensors contradict (context 99 against wpe's 16 rows),
  // and no hyperparameters at all: the load's shape checks say what does not fit.
  for (const nlohmann::json& hparams :
       {nlohmann::json{{"model", "gpt"}, {"heads", "four"}},
        nlohmann::json{{"model", "gpt"}, {"context", 99}}, nlohmann::json::object()}) {
    o.quant.init_from = weights_file(dir, hparams);
    EXPECT_NO_THROW(check_init_from(o, g)) << hparams.dump();
  }
  o.quant.init_from = dir.file("absent.safetensors");
  EXPECT_NO_THROW(check_init_from(o, g));
}

// A checkpoint of a QLoRA GPT (adapters of rank 8 over nf4 layers) at step 3 recording
// `hparams` (trainer metadata as train::save_checkpoint writes it, reduced to what check_resume
// reads; `meta` replaces or adds fields), its tensors reduced to those the checks read, and
// `more` ones.
std::string qlora_checkpoint(const TempDir& dir, const nlohmann::json& hparams,
                             const nlohmann::json& meta_changes = nlohmann::json::object(),
                             const io::NamedTensors& more = {}) {
  const std::string path = dir.file("ck.safetensors");
  nlohmann::json meta = {
      {"format", "mantissa-checkpoint"},
      {"global_step", 3},
      {"precision", "nf4"},
      {"precision_plugin",
       {{"BitsandbytesPrecision",
         {{"dtype", "bfloat16"}, {"ignore_modules", nlohmann::json::array()}, {"mode", "nf4"}}}}},
      {"hyper_parameters", hparams}};
  if (meta_changes.is_object()) meta.update(meta_changes);
  io::NamedTensors tensors = {
      {"model.wpe.weight", zeros({16, 32}, kFloat32)},
      {"model.h0.attn.in_proj.base_layer.weight", zeros({1536, 1}, kUInt8)},
      {"model.h0.attn.in_proj.base_layer.weight.quant_state.bitsandbytes__nf4", zeros({4}, kUInt8)},
      {"model.h0.attn.in_proj.lora_A.weight", zeros({8, 32}, kFloat32)}};
  tensors.insert(tensors.end(), more.begin(), more.end());
  io::save_safetensors(path, tensors, {{"mantissa.trainer", meta.dump()}});
  return path;
}

TEST(ResumeCheck, AdapterScaleIsRefusedDropoutAndComputeDtypeAreWarnedAbout) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  o.precision = "nf4";
  o.quant.lora_rank = 8;
  GptOptions g;
  g.layers = 1;
  g.width = 32;
  g.context = 16;
  g.heads = 2;
  const nlohmann::json trained = {
      {"model", "gpt"},     {"layers", 1},          {"width", 32},        {"heads", 2},
      {"context", 16},      {"lora-rank", 8},       {"lora-alpha", 16.0}, {"lora-dropout", 0.0},
      {"quant-ignore", ""}, {"quant-dtype", "bf16"}};
  o.resume = qlora_checkpoint(dir, trained);
  {
    const WarningRecorder warnings;
    EXPECT_NO_THROW(check_resume(o, g));  // as trained: nothing to say
    EXPECT_TRUE(warnings.messages().empty());
  }
  o.quant.lora_alpha = 64;
  expect_error([&] { check_resume(o, g); },
               {"[--resume]", "was trained with --lora-alpha 16, but --lora-alpha is 64 here",
                "scaled by alpha / rank = 2 and would be scaled by 8", "pass --lora-alpha 16"});
  o.quant.lora_alpha = 16;
  o.quant.lora_dropout = 0.1;
  o.quant.quant_dtype = "fp32";
  {
    const WarningRecorder warnings;
    EXPECT_NO_THROW(check_resume(o, g));
    ASSERT_EQ(warnings.messages().size(), 2u);
    EXPECT_EQ(warnings.messages()[0],
              "resuming: the LoRA dropout (--lora-dropout) was 0 in the checkpoint and is 0.1 in "
              "this run: applying 0.1 from step 3 on");
    EXPECT_EQ(warnings.messages()[1],
              "resuming: the quantized layers computed in bf16 in the checkpoint and compute in "
              "fp32 in this run (--quant-dtype): applying fp32 from step 3 on; the losses from "
              "there are not those of a run that kept bf16");
  }
  // Adapters of another rank, or another precision: the restore refuses them in its own
  // words (the tensors do not fit), so the settings are not compared.
  o.quant.lora_alpha = 64;
  o.quant.lora_rank = 4;
  o.precision = "nf4-dq";
  {
    const WarningRecorder warnings;
    EXPECT_NO_THROW(check_resume(o, g));
    EXPECT_TRUE(warnings.messages().empty());
  }
}

// Metadata that the file's own tensors contradict (an nf4 LoRA checkpoint whose lora-rank reads
// 64 or -1, a quant-dtype of "fp8"): a resume refuses it naming the field, its value and the
// tensor, before anything is built.
TEST(ResumeCheck, MetadataTheTensorsContradictIsRefusedNamingBoth) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  o.precision = "nf4";
  o.quant.lora_rank = 8;
  GptOptions g;
  g.layers = 1;
  g.width = 32;
  g.context = 16;
  g.heads = 2;
  const nlohmann::json trained = {
      {"model", "gpt"},     {"layers", 1},          {"width", 32},        {"heads", 2},
      {"context", 16},      {"lora-rank", 8},       {"lora-alpha", 16.0}, {"lora-dropout", 0.0},
      {"quant-ignore", ""}, {"quant-dtype", "bf16"}};
  o.resume = qlora_checkpoint(dir, trained);
  EXPECT_NO_THROW(check_resume(o, g));
  const std::string ck = o.resume;
  const auto refused = [&](const std::string& message) {
    EXPECT_EQ(
        mantissa::testing::error_of([&] { check_resume(o, g); }),
        "[--resume] " + ck + ": " + message + "; the file is damaged: use an earlier checkpoint");
  };
  nlohmann::json damaged = trained;
  damaged["lora-rank"] = 64;
  o.resume = qlora_checkpoint(dir, damaged);
  refused(
      "hyper_parameters.lora-rank is 64, but 'model.h0.attn.in_proj.lora_A.weight' has rank 8 (its "
      "rows)");
  damaged["lora-rank"] = -1;
  o.resume = qlora_checkpoint(dir, damaged);
  refused("hyper_parameters.lora-rank is -1, but a LoRA rank is 0 (no adapters) or more");
  damaged = trained;
  damaged["quant-dtype"] = "fp8";
  o.resume = qlora_checkpoint(dir, damaged);
  refused("hyper_parameters.quant-dtype is 'fp8', which is none of bf16, fp16, fp32");
  // A valid dtype that the plugin's state contradicts (it computed in bfloat16).
  damaged["quant-dtype"] = "fp16";
  o.resume = qlora_checkpoint(dir, damaged);
  refused(
      "hyper_parameters.quant-dtype is 'fp16', but the precision plugin's state says its "
      "quantized layers compute in 'bfloat16' (precision_plugin.BitsandbytesPrecision.dtype)");
  // The recorded precision against the 4-bit layers' state.
  o.resume = qlora_checkpoint(dir, trained, {{"precision", "fp4"}});
  refused(
      "the trainer metadata's precision is 'fp4', but its tensors hold nf4 weights "
      "('model.h0.attn.in_proj.base_layer.weight.quant_state.bitsandbytes__nf4') without "
      "double-quantized absmax, which precision nf4 writes");
  o.resume = qlora_checkpoint(
      dir, trained, {},
      {{"model.h0.attn.in_proj.base_layer.weight.nested_absmax", zeros({1}, kFloat32)}});
  refused(
      "the trainer metadata's precision is 'nf4', but its tensors hold nf4 weights "
      "('model.h0.attn.in_proj.base_layer.weight.quant_state.bitsandbytes__nf4') with "
      "double-quantized absmax ('model.h0.attn.in_proj.base_layer.weight.nested_absmax'), which "
      "precision nf4-dq writes");
  // FP8 state, which only the transformer-engine precisions write (eval reads the same check).
  io::SafetensorsHeader fp8;
  fp8.tensors = {{"model.h0.mlp.fc1.weight", kFloat32, {128, 32}},
                 {"model.h0.mlp.fc1.fp8_scale", kFloat32, {3}}};
  fp8.metadata["mantissa.trainer"] = nlohmann::json{{"precision", "32-true"}}.dump();
  EXPECT_EQ(mantissa::testing::error_of([&] {
              check_stored_format(fp8, "te.safetensors", "eval", "use an earlier checkpoint");
            }),
            "[eval] te.safetensors: the trainer metadata's precision is '32-true', but its tensors "
            "hold FP8 state ('model.h0.mlp.fc1.fp8_scale'), which only the transformer-engine "
            "precisions write; the file is damaged: use an earlier checkpoint");
  fp8.metadata["mantissa.trainer"] = nlohmann::json{{"precision", "transformer-engine"}}.dump();
  EXPECT_NO_THROW(check_stored_format(fp8, "te.safetensors", "eval", "use an earlier checkpoint"));
}

// The trial's damaged checkpoints: `train --resume` took a "model": "resnet" and a "hidden":
// "999999,999999" its tensors contradict in silence (the run's flags replaced them), while eval
// refused both as damage. A resume checks the record as eval does, with eval's words.
TEST(ResumeCheck, DamagedHyperParametersAreRefusedAsEvalRefusesThem) {
  TempDir dir;
  const TensorShapes mlp = {{"model.net.0.weight", {256, 784}},
                            {"model.net.0.bias", {256}},
                            {"model.net.2.weight", {10, 256}},
                            {"model.net.2.bias", {10}}};
  auto checkpoint = [&](const nlohmann::json& hparams) {
    const std::string path = dir.file("ck.safetensors");
    const nlohmann::json meta = {{"format", "mantissa-checkpoint"},
                                 {"global_step", 16},
                                 {"precision", "32-true"},
                                 {"hyper_parameters", hparams}};
    io::NamedTensors tensors;
    for (const auto& [name, shape] : mlp) tensors.emplace_back(name, zeros(shape, kFloat32));
    io::save_safetensors(path, tensors, {{"mantissa.trainer", meta.dump()}});
    return path;
  };
  const nlohmann::json trained = {{"model", "mlp"},     {"hidden", "256"},
                                  {"lora-rank", 0},     {"lora-alpha", 16.0},
                                  {"quant-ignore", ""}, {"quant-dtype", "bf16"}};
  TrainOptions o;
  o.hidden = "256";
  o.resume = checkpoint(trained);
  EXPECT_NO_THROW(check_resume(o));
  // A record without hidden (an older file) is nothing to check.
  nlohmann::json without = trained;
  without.erase("hidden");
  o.resume = checkpoint(without);
  EXPECT_NO_THROW(check_resume(o));

  for (const auto& [key, value] : {std::pair<std::string, nlohmann::json>{"model", "resnet"},
                                   {"hidden", "999999,999999"},
                                   {"hidden", 256},
                                   {"model", 7}}) {
    nlohmann::json damaged = trained;
    damaged[key] = value;
    o.resume = checkpoint(damaged);
    // eval's message for the same file, with no flag given.
    std::string eval_message;
    try {
      TrainOptions eo;
      GptOptions eg;
      apply_model_hparams(
          damaged, o.resume, mlp, [](const std::string&) { return false; }, eo, eg);
    } catch (const Error& e) {
      eval_message = e.what();
    }
    ASSERT_NE(eval_message.find("; the file is damaged: pass --" + key + " as trained"),
              std::string::npos)
        << eval_message;
    const std::string same = eval_message.substr(
        eval_message.find("] ") + 2, eval_message.find(": pass --") - eval_message.find("] ") - 2);
    expect_error([&] { check_resume(o); }, {"[--resume] " + same + ": use an earlier checkpoint"});
  }
  // Not an object at all.
  o.resume = checkpoint(nlohmann::json::array({1}));
  expect_error(
      [&] { check_resume(o); },
      {"[--resume]", "hyper_parameters must be a JSON object, got array", "the file is damaged"});
}

}  // namespace
}  // namespace mantissa::recipes
