// The hyperparameters a run stores in its checkpoints (mantissa/recipes/model_hparams.h) and how
// eval reads them back: values fill the flags not given, a given shape flag must match the file, a
// given corpus or adapter scale wins, a value of the wrong type is an error naming the key.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mantissa/recipes/model_hparams.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;

const auto kNothingGiven = [](const std::string&) { return false; };

GptOptions gpt_options(int64_t layers, int64_t width, int64_t heads, int64_t context,
                       const std::string& text) {
  GptOptions g;
  g.layers = layers;
  g.width = width;
  g.heads = heads;
  g.context = context;
  g.text = text;
  return g;
}

TEST(ModelHparams, ImageAndGptRecordTheirShapesAndAdapters) {
  TrainOptions o;
  o.model = "mlp";
  o.hidden = "64,32";
  o.quant.lora_rank = 4;
  o.quant.lora_alpha = 8;
  o.quant.lora_dropout = 0.05;
  o.quant.quant_ignore = "net.2";
  const nlohmann::json mlp = image_model_hparams(o);
  EXPECT_EQ(mlp.at("model"), "mlp");
  EXPECT_EQ(mlp.at("hidden"), "64,32");
  EXPECT_EQ(mlp.at("lora-rank"), 4);
  EXPECT_EQ(mlp.at("lora-alpha"), 8.0);
  EXPECT_EQ(mlp.at("lora-dropout"), 0.05);  // a resume compares it (init_from_check.h)
  EXPECT_EQ(mlp.at("quant-ignore"), "net.2");
  EXPECT_FALSE(mlp.contains("patch"));  // the vit's only
  o.model = "vit";
  o.vit_patch = 4;
  o.vit_pool = "mean";
  const nlohmann::json vit = image_model_hparams(o);
  EXPECT_EQ(vit.at("patch"), 4);
  EXPECT_EQ(vit.at("pool"), "mean");
  EXPECT_FALSE(vit.contains("hidden"));

  const GptOptions g = gpt_options(2, 48, 3, 24, "corpus.txt");
  const nlohmann::json gpt = gpt_model_hparams(o, g);
  EXPECT_EQ(gpt.at("model"), "gpt");
  EXPECT_EQ(gpt.at("layers"), 2);
  EXPECT_EQ(gpt.at("width"), 48);
  EXPECT_EQ(gpt.at("heads"), 3);
  EXPECT_EQ(gpt.at("context"), 24);
  EXPECT_EQ(gpt.at("text"), "corpus.txt");
}

// Written by one run, read into the default options of another: the same options come back.
TEST(ModelHparams, RoundTripIntoDefaultOptions) {
  TrainOptions o;
  o.quant.lora_rank = 8;
  o.quant.lora_alpha = 32;
  o.quant.quant_dtype = "fp16";
  const GptOptions g = gpt_options(3, 64, 4, 32, "t.txt");
  TrainOptions eo;
  GptOptions eg;
  apply_model_hparams(gpt_model_hparams(o, g), "f.safetensors", {}, kNothingGiven, eo, eg);
  EXPECT_EQ(eo.model, "gpt");
  EXPECT_EQ(eg.layers, 3);
  EXPECT_EQ(eg.width, 64);
  EXPECT_EQ(eg.heads, 4);
  EXPECT_EQ(eg.context, 32);
  EXPECT_EQ(eg.text, "t.txt");
  EXPECT_EQ(eo.quant.lora_rank, 8);
  EXPECT_EQ(eo.quant.lora_alpha, 32.0);
  EXPECT_EQ(eo.quant.quant_dtype, "fp16");
}

TEST(ModelHparams, GivenFlagsWinOrMustMatch) {
  const nlohmann::json saved = {{"model", "gpt"},  {"width", 64},      {"heads", 4},
                                {"text", "a.txt"}, {"lora-alpha", 16}, {"future-key", 1}};
  const std::set<std::string> given = {"heads", "text", "lora-alpha"};
  const auto was_given = [&](const std::string& flag) { return given.contains(flag); };
  TrainOptions o;
  GptOptions g;
  g.heads = 4;             // as trained: accepted
  g.text = "b.txt";        // another corpus: allowed
  o.quant.lora_alpha = 8;  // another adapter scale: allowed
  apply_model_hparams(saved, "f.safetensors", {}, was_given, o, g);
  EXPECT_EQ(g.text, "b.txt");
  EXPECT_EQ(o.quant.lora_alpha, 8.0);
  EXPECT_EQ(g.width, 64);  // not given: from the file
  EXPECT_EQ(o.model, "gpt");

  g.heads = 8;  // another head count would load and compute something else
  expect_error([&] { apply_model_hparams(saved, "f.safetensors", {}, was_given, o, g); },
               "f.safetensors was trained with --heads 4, but --heads is 8 here");
}

TEST(ModelHparams, DamagedValuesAreErrorsNamingTheKey) {
  TrainOptions o;
  GptOptions g;
  expect_error(
      [&] {
        apply_model_hparams({{"width", "wide"}}, "f.safetensors", {}, kNothingGiven, o, g);
      },
      "hyper_parameters.width has the wrong type (string)");
  expect_error(
      [&] {
        apply_model_hparams({{"hidden", 256}}, "f.safetensors", {}, kNothingGiven, o, g);
      },
      "hyper_parameters.hidden has the wrong type (number)");
  expect_error(
      [&] {
        apply_model_hparams({{"lora-rank", 2.5}}, "f.safetensors", {}, kNothingGiven, o, g);
      },
      "hyper_parameters.lora-rank has the wrong type");
  expect_error(
      [&] {
        apply_model_hparams(nlohmann::json::array(), "f.safetensors", {}, kNothingGiven, o, g);
      },
      "hyper_parameters must be a JSON object");
  expect_error(
      [&] {
        apply_model_hparams({{"model", "gpt\x1b[2J"}}, "f.safetensors", {}, kNothingGiven, o, g);
      },
      "hyper_parameters.model holds control characters");
  // A model no build knows blames the file, not a --model flag ("[train] unknown model").
  expect_error(
      [&] {
        apply_model_hparams({{"model", "resnet"}}, "f.safetensors", {}, kNothingGiven, o, g);
      },
      "f.safetensors: hyper_parameters.model is 'resnet', which is none of mlp, cnn, vit, gpt; "
      "the file is damaged: pass --model as trained");
  EXPECT_EQ(o.model, "mlp");
  // A damaged value whose flag is given is replaced by the flag.
  g.width = 64;
  apply_model_hparams(
      {{"width", "wide"}}, "f.safetensors", {},
      [](const std::string& flag) { return flag == "width"; }, o, g);
  EXPECT_EQ(g.width, 64);
  g.width = 256;
  EXPECT_EQ(g.width, 256);  // nothing was changed by the refused values
}

// A file without the record (older, or its metadata stripped) failed with one size mismatch
// per tensor under the default --hidden: its mlp layers name the flag to pass instead.
TEST(ModelHparams, AFileWithoutTheRecordNamesTheHiddenItsTensorsHold) {
  const TensorShapes mlp = {{"model.net.0.weight", {64, 784}},
                            {"model.net.0.bias", {64}},
                            {"model.net.2.weight", {10, 64}},
                            {"model.net.2.bias", {10}}};
  const nlohmann::json none = nlohmann::json::object();  // what eval reads from such a file
  TrainOptions o;                                        // mlp, default --hidden
  GptOptions g;
  ASSERT_NE(o.hidden, "64");
  expect_error([&] { apply_model_hparams(none, "old.safetensors", mlp, kNothingGiven, o, g); },
               {"old.safetensors records no model hyper-parameters (a file written before they "
                "were saved, or stripped of its metadata); its tensors are those of an mlp with "
                "--hidden 64: pass --hidden 64"});
  // With the flag (or a default that already fits) nothing is said.
  o.hidden = "64";
  apply_model_hparams(
      none, "old.safetensors", mlp, [](const std::string& f) { return f == "hidden"; }, o, g);
  apply_model_hparams(none, "old.safetensors", mlp, kNothingGiven, o, g);
  EXPECT_EQ(o.hidden, "64");
}

// The sizes a file records must agree with its own tensors, checked before a model is built: a
// damaged "hidden": "999999,999999" made eval allocate about 1.5 GiB and fail out of memory.
TEST(ModelHparams, SizesTheTensorsContradictAreDamage) {
  // An MLP 784-256-10 checkpoint (a Trainer's "model." names).
  const TensorShapes mlp = {{"model.net.0.weight", {256, 784}},
                            {"model.net.0.bias", {256}},
                            {"model.net.2.weight", {10, 256}},
                            {"model.net.2.bias", {10}}};
  TrainOptions o;
  GptOptions g;
  expect_error(
      [&] {
        apply_model_hparams({{"model", "mlp"}, {"hidden", "999999,999999"}}, "f.safetensors", mlp,
                            kNothingGiven, o, g);
      },
      {"f.safetensors: hyper_parameters.hidden is 999999,999999, but the file's tensors are "
       "those of hidden '256' (its layers' biases have 256, 10 outputs); the file is damaged: "
       "pass --hidden as trained"});
  EXPECT_EQ(o.hidden, "256");  // unchanged
  // The flag, given, replaces the damaged value; an agreeing value is taken.
  o.hidden = "256";
  apply_model_hparams(
      {{"model", "mlp"}, {"hidden", "999999,999999"}}, "f.safetensors", mlp,
      [](const std::string& flag) { return flag == "hidden"; }, o, g);
  EXPECT_EQ(o.hidden, "256");
  TrainOptions fresh;
  fresh.hidden = "64";
  apply_model_hparams({{"model", "mlp"}, {"hidden", "256"}}, "f.safetensors", mlp, kNothingGiven,
                      fresh, g);
  EXPECT_EQ(fresh.hidden, "256");
  // Under LoRA the biases sit in base_layer; a two-layer MLP shows both sizes.
  const TensorShapes lora = {{"model.net.0.base_layer.bias", {64}},
                             {"model.net.2.base_layer.bias", {32}},
                             {"model.net.4.base_layer.bias", {10}}};
  expect_error(
      [&] {
        TrainOptions t;
        apply_model_hparams({{"model", "mlp"}, {"hidden", "64"}}, "f.safetensors", lora,
                            kNothingGiven, t, g);
      },
      "the file's tensors are those of hidden '64,32'");

  // A GPT's width, context and layers (a --save-weights file: no prefix).
  const TensorShapes gpt = {{"wte.weight", {256, 32}},
                            {"wpe.weight", {16, 32}},
                            {"h0.ln1.weight", {32}},
                            {"h1.ln1.weight", {32}},
                            {"h1.attn.in_proj.lora_A.weight", {4, 32}}};
  const nlohmann::json good = {{"model", "gpt"}, {"layers", 2}, {"width", 32}, {"context", 16}};
  TrainOptions go;
  GptOptions gg;
  apply_model_hparams(good, "g.safetensors", gpt, kNothingGiven, go, gg);
  EXPECT_EQ(gg.width, 32);
  EXPECT_EQ(gg.layers, 2);
  EXPECT_EQ(gg.context, 16);
  for (const auto& [key, bad, why] : std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"width", 999999,
            "is 999999, but the file's tensors say 32 (the columns of wte.weight)"},
           {"context", 1 << 30,
            "is 1073741824, but the file's tensors say 16 (the rows of wpe.weight)"},
           {"layers", 5000,
            "is 5000, but the file's tensors say 2 (the blocks h0, h1, ... it "
            "holds)"}}) {
    nlohmann::json damaged = good;
    damaged[key] = bad;
    GptOptions fresh_g;
    expect_error(
        [&] { apply_model_hparams(damaged, "g.safetensors", gpt, kNothingGiven, go, fresh_g); },
        {"g.safetensors: hyper_parameters." + key + " " + why, "pass --" + key + " as trained"});
  }
}

// The GPT's head count, which no tensor shows, and sizes the tensors do not show are checked
// for what a GPT can be: a damaged file's heads 0 or 3 (for width 32) reached the GPT, which
// refused it in its own words ("[GPT] width 32 must be divisible by heads 3") without naming
// the file or the key.
TEST(ModelHparams, GptSizesNoTensorShowsAreRangeChecked) {
  const TensorShapes gpt = {
      {"wte.weight", {256, 32}}, {"wpe.weight", {16, 32}}, {"h0.ln1.weight", {32}}};
  const nlohmann::json good = {
      {"model", "gpt"}, {"layers", 1}, {"width", 32}, {"heads", 4}, {"context", 16}};
  TrainOptions o;
  GptOptions g;
  apply_model_hparams(good, "g.safetensors", gpt, kNothingGiven, o, g);
  EXPECT_EQ(g.heads, 4);
  for (const auto& [heads, why] : std::vector<std::pair<int64_t, std::string>>{
           {0, "is 0, but a GPT has at least 1 attention head"},
           {-2, "is -2, but a GPT has at least 1 attention head"},
           {3, "is 3, which does not divide the width 32 (each head takes width / heads)"},
           {64, "is 64, which does not divide the width 32"}}) {
    nlohmann::json damaged = good;
    damaged["heads"] = heads;
    GptOptions fresh;
    expect_error(
        [&] { apply_model_hparams(damaged, "g.safetensors", gpt, kNothingGiven, o, fresh); },
        {"g.safetensors: hyper_parameters.heads " + why,
         "the file is damaged: pass --heads as trained"});
    EXPECT_EQ(fresh.heads, GptOptions{}.heads);  // unchanged
  }
  // Without the tensors (a file missing them), the recorded width is the one heads must divide,
  // and no size may be below 1.
  GptOptions from_record;
  apply_model_hparams({{"model", "gpt"}, {"width", 48}, {"heads", 3}}, "g.safetensors", {},
                      kNothingGiven, o, from_record);
  EXPECT_EQ(from_record.heads, 3);
  for (const std::string key : {"layers", "width", "context"}) {
    GptOptions fresh;
    expect_error(
        [&] {
          apply_model_hparams({{"model", "gpt"}, {key, 0}}, "g.safetensors", {}, kNothingGiven, o,
                              fresh);
        },
        {"hyper_parameters." + key + " is 0, but a GPT's sizes are at least 1"});
  }
  // A given --heads replaces the damaged value, as a given flag does for every damaged key.
  GptOptions given;
  given.heads = 2;
  apply_model_hparams(
      {{"model", "gpt"}, {"width", 32}, {"heads", 3}}, "g.safetensors", gpt,
      [](const std::string& flag) { return flag == "heads"; }, o, given);
  EXPECT_EQ(given.heads, 2);
}

// A transformer-engine run stores the FP8 recipe it used (defaults resolved) and the modules it
// kept out of FP8; the other precisions store none of them.
TEST(ModelHparams, Fp8RunsRecordTheirRecipeAndExclusions) {
  TrainOptions o;
  EXPECT_FALSE(gpt_model_hparams(o, GptOptions{}).contains("fp8-format"));  // 32-true
  o.precision = "transformer-engine";
  const nlohmann::json defaults = gpt_model_hparams(o, GptOptions{});
  EXPECT_EQ(defaults.at("fp8-format"), "HYBRID");
  EXPECT_EQ(defaults.at("fp8-amax-history-len"), 1024);
  EXPECT_EQ(defaults.at("fp8-amax-compute-algo"), "max");
  EXPECT_EQ(defaults.at("fp8-margin"), 0);
  EXPECT_EQ(defaults.at("fp8-exclude"), "");
  o.precision_options = {{"fp8_format", "e4m3"},
                         {"fp8_amax_history_len", "16"},
                         {"fp8_amax_compute_algo", "most_recent"},
                         {"fp8_margin", "2"},
                         {"fp8_exclude", "head, h0,h0"}};
  o.model = "vit";
  const nlohmann::json set = image_model_hparams(o);
  EXPECT_EQ(set.at("fp8-format"), "E4M3");
  EXPECT_EQ(set.at("fp8-amax-history-len"), 16);
  EXPECT_EQ(set.at("fp8-amax-compute-algo"), "most_recent");
  EXPECT_EQ(set.at("fp8-margin"), 2);
  EXPECT_EQ(set.at("fp8-exclude"), "h0,head");

  // Read back into the --fp8-* settings of an eval that gives none of the flags.
  PrecisionSettings settings;
  apply_fp8_hparams(set, nullptr, "f.safetensors", {}, kNothingGiven, settings);
  EXPECT_EQ(settings, (PrecisionSettings{{"fp8_recipe", "delayed"},
                                         {"fp8_format", "E4M3"},
                                         {"fp8_amax_history_len", "16"},
                                         {"fp8_amax_compute_algo", "most_recent"},
                                         {"fp8_margin", "2"},
                                         {"fp8_exclude", "h0,head"}}));

  // Current scaling: the recipe and its power-of-2 option; the delayed settings do not apply.
  o.precision_options = {{"fp8_recipe", "current"}, {"fp8_power_2_scales", "true"}};
  const nlohmann::json current = image_model_hparams(o);
  EXPECT_EQ(current.at("fp8-recipe"), "current");
  EXPECT_EQ(current.at("fp8-power-2-scales"), "true");
  EXPECT_FALSE(current.contains("fp8-amax-history-len"));
  EXPECT_FALSE(current.contains("fp8-margin"));
  PrecisionSettings current_settings;
  apply_fp8_hparams(current, nullptr, "f.safetensors", {}, kNothingGiven, current_settings);
  EXPECT_EQ(current_settings, (PrecisionSettings{{"fp8_recipe", "current"},
                                                 {"fp8_power_2_scales", "true"},
                                                 {"fp8_format", "HYBRID"}}));
}

// The FP8 layers of a Trainer checkpoint: h0 kept out of FP8, h1's Linear layers with 16 rows
// of amax history.
const TensorShapes kFp8Gpt = {{"model.wte.weight", {256, 32}},
                              {"model.h0.attn.in_proj.weight", {96, 32}},
                              {"model.h1.attn.in_proj.weight", {96, 32}},
                              {"model.h1.attn.in_proj.fp8_scale", {3}},
                              {"model.h1.attn.in_proj.fp8_amax_history", {16, 3}},
                              {"optimizer.0.h0.attn.in_proj.fp8_scale", {3}}};

TEST(ModelHparams, Fp8FlagsWinOrMustMatch) {
  const nlohmann::json saved = {{"fp8-format", "E4M3"},
                                {"fp8-amax-history-len", 16},
                                {"fp8-amax-compute-algo", "max"},
                                {"fp8-margin", 0},
                                {"fp8-exclude", "h0,h1.mlp"}};
  // The recipe flags win; the history length and exclusions, given as trained, are accepted
  // (the names in any order).
  const auto was_given = [](const std::string& flag) {
    return flag == "fp8-format" || flag == "fp8-margin" || flag == "fp8-amax-history-len" ||
           flag == "fp8-exclude";
  };
  PrecisionSettings settings = {{"fp8_format", "HYBRID"},
                                {"fp8_margin", "1"},
                                {"fp8_amax_history_len", "16"},
                                {"fp8_exclude", "h1.mlp,h0"}};
  apply_fp8_hparams(saved, nullptr, "f.safetensors", kFp8Gpt, was_given, settings);
  EXPECT_EQ(settings.at("fp8_format"), "HYBRID");
  EXPECT_EQ(settings.at("fp8_margin"), "1");
  EXPECT_EQ(settings.at("fp8_amax_compute_algo"), "max");  // not given: from the file
  EXPECT_EQ(settings.at("fp8_exclude"), "h1.mlp,h0");
  // Another history length or exclusion list would not load the file's layers.
  settings["fp8_amax_history_len"] = "1024";
  expect_error(
      [&] { apply_fp8_hparams(saved, nullptr, "f.safetensors", kFp8Gpt, was_given, settings); },
      "f.safetensors was trained with --fp8-amax-history-len 16, but --fp8-amax-history-len is "
      "1024 here: leave --fp8-amax-history-len out");
  settings["fp8_amax_history_len"] = "16";
  settings["fp8_exclude"] = "h0";
  expect_error(
      [&] { apply_fp8_hparams(saved, nullptr, "f.safetensors", kFp8Gpt, was_given, settings); },
      "f.safetensors was trained with --fp8-exclude h0,h1.mlp, but --fp8-exclude is h0 here");
  // An empty list reads as "" in the message, not as nothing after the flag.
  nlohmann::json none = saved;
  none["fp8-exclude"] = "";
  expect_error(
      [&] { apply_fp8_hparams(none, nullptr, "f.safetensors", kFp8Gpt, was_given, settings); },
      "f.safetensors was trained with --fp8-exclude \"\", but --fp8-exclude is h0 here");
}

// eval of a file trained under current: a delayed-only flag given is refused even at its
// default value, which the file's own record (HYBRID under nvfp4) is not.
TEST(ModelHparams, AFlagTheFilesRecipeDoesNotReadIsRefusedEvenAtItsDefault) {
  const nlohmann::json current = {{"fp8-recipe", "current"},
                                  {"fp8-format", "HYBRID"},
                                  {"fp8-power-2-scales", "false"},
                                  {"fp8-exclude", ""}};
  const auto margin_given = [](const std::string& flag) { return flag == "fp8-margin"; };
  PrecisionSettings settings = {{"fp8_margin", "0"}};
  expect_error(
      [&] { apply_fp8_hparams(current, nullptr, "f.safetensors", {}, margin_given, settings); },
      "margin 0 applies to the delayed recipe only; the current recipe takes each scale from "
      "the amax of the tensor being cast: leave --fp8-margin out");
  // Not given, the same settings from the file pass.
  PrecisionSettings from_file;
  apply_fp8_hparams(current, nullptr, "f.safetensors", {}, kNothingGiven, from_file);
  EXPECT_EQ(from_file.at("fp8_recipe"), "current");
  const nlohmann::json nvfp4 = {{"fp8-recipe", "nvfp4"}, {"fp8-format", "HYBRID"}};
  PrecisionSettings nvfp4_settings;
  apply_fp8_hparams(nvfp4, nullptr, "f.safetensors", {}, kNothingGiven, nvfp4_settings);
  EXPECT_EQ(nvfp4_settings.at("fp8_format"), "HYBRID");
  const auto format_given = [](const std::string& flag) { return flag == "fp8-format"; };
  PrecisionSettings format_settings = {{"fp8_format", "HYBRID"}};
  expect_error(
      [&] {
        apply_fp8_hparams(nvfp4, nullptr, "f.safetensors", {}, format_given, format_settings);
      },
      "fp8_format HYBRID applies to the delayed, current and mxfp8 recipes only; the nvfp4 "
      "recipe");
}

// Files written before the hyperparameters held the fp8-* keys: the recipe comes from the
// trainer metadata (its own key names), the exclusions from the flag alone.
TEST(ModelHparams, OlderFp8FilesUseTheirTrainerMetadataRecipe) {
  const nlohmann::json recipe = {{"fp8_format", "E4M3"},
                                 {"margin", 0},
                                 {"amax_history_len", 16},
                                 {"amax_compute_algo", "most_recent"},
                                 {"reduce_amax", true}};
  PrecisionSettings settings;
  apply_fp8_hparams({{"model", "gpt"}}, recipe, "old.safetensors", kFp8Gpt, kNothingGiven,
                    settings);
  EXPECT_EQ(settings, (PrecisionSettings{{"fp8_format", "E4M3"},
                                         {"fp8_amax_history_len", "16"},
                                         {"fp8_amax_compute_algo", "most_recent"},
                                         {"fp8_margin", "0"}}));
  // Neither the keys nor a recipe (a --save-weights file of an older build): nothing is set,
  // the plugin's defaults and the flags apply.
  PrecisionSettings none;
  apply_fp8_hparams(nlohmann::json::object(), nullptr, "w.safetensors", {}, kNothingGiven, none);
  EXPECT_TRUE(none.empty());
  expect_error(
      [&] {
        apply_fp8_hparams({{"model", "gpt"}}, {{"amax_history_len", 8}}, "old.safetensors", kFp8Gpt,
                          kNothingGiven, none);
      },
      {"old.safetensors: the FP8 recipe of its trainer metadata, as fp8-amax-history-len is 8, "
       "but the file's FP8 layers keep 16 rows of amax history",
       "pass --fp8-amax-history-len as trained"});
  expect_error(
      [&] {
        apply_fp8_hparams({{"model", "gpt"}}, "E4M3", "old.safetensors", kFp8Gpt, kNothingGiven,
                          none);
      },
      "the FP8 recipe of its trainer metadata must be a JSON object, got string");
}

TEST(ModelHparams, DamagedFp8ValuesAreErrorsNamingTheKey) {
  const nlohmann::json good = {{"fp8-format", "E4M3"},
                               {"fp8-amax-history-len", 16},
                               {"fp8-amax-compute-algo", "max"},
                               {"fp8-margin", 0},
                               {"fp8-exclude", "h0"}};
  for (const auto& [key, bad, why] :
       std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"fp8-format", 3, "has the wrong type (number)"},
           {"fp8-format", "E9M9", "is refused: [fp8 recipe] unknown fp8_format 'E9M9'"},
           {"fp8-amax-history-len", "16", "has the wrong type (string)"},
           {"fp8-amax-history-len", int64_t{1} << 40, "is refused: [fp8 recipe] amax_history_len"},
           {"fp8-amax-history-len", 8,
            "is 8, but the file's FP8 layers keep 16 rows of amax history (their "
            "fp8_amax_history tensors)"},
           {"fp8-amax-history-len", 0,
            "is refused: [fp8 recipe] amax_history_len must be at least 1"},
           {"fp8-amax-compute-algo", "mean", "is refused: [fp8 recipe] unknown amax_compute_algo"},
           {"fp8-margin", 2.5, "has the wrong type (number)"},
           {"fp8-margin", int64_t{1} << 40, "is refused: [fp8 recipe] margin"},
           {"fp8-exclude", nlohmann::json::array({"h0"}), "has the wrong type (array)"},
           {"fp8-exclude", "h0\x1b[2J", "holds control characters"},
           {"fp8-exclude", "h1",
            "is h1, but the file's tensors hold FP8 state inside 'h1' "
            "(model.h1.attn.in_proj.fp8_amax_history)"}}) {
    nlohmann::json damaged = good;
    damaged[key] = bad;
    PrecisionSettings settings;
    expect_error(
        [&] {
          apply_fp8_hparams(damaged, nullptr, "f.safetensors", kFp8Gpt, kNothingGiven, settings);
        },
        {"f.safetensors: hyper_parameters." + key + " " + why,
         "the file is damaged: pass --" + key + " as trained"});
  }
  // The good values are taken as they are.
  PrecisionSettings settings;
  apply_fp8_hparams(good, nullptr, "f.safetensors", kFp8Gpt, kNothingGiven, settings);
  EXPECT_EQ(settings.at("fp8_exclude"), "h0");
}

}  // namespace
}  // namespace mantissa::recipes
