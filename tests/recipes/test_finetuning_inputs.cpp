// Bad and edge input to the fine-tuning set-up (mantissa/recipes/finetuning.h, docs/qlora.md):
// --lora-rank 0 and negative, --init-from a checkpoint of another model or shape (and a Trainer
// checkpoint of an image model, whose weights sit under "model.net."), a weight whose size is not a
// multiple of the 4-bit block (padded, as bitsandbytes does) and a corrupted quant state read
// from a file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/models/mlp.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

// Saves `model`'s state dict, each name prefixed, as a safetensors file.
std::string save_prefixed(const nn::Module& model, const std::string& prefix,
                          const std::string& path) {
  io::NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(prefix + name, t);
  io::save_safetensors(path, tensors);
  return path;
}

bool has_lora(const nn::Module& model) {
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.find("lora_A") != std::string::npos) return true;
  }
  return false;
}

TEST(FinetuningInputs, LoraRankZeroMeansNoAdaptersNegativeIsAnError) {
  QuantOptions q;
  q.lora_rank = 0;
  EXPECT_NO_THROW(validate_quant_options(q));
  auto mlp = models::make_mlp(12, {8}, 3);
  TrainMetrics m;
  prepare_model_for_finetuning(*mlp, nullptr, q, m);
  EXPECT_FALSE(has_lora(*mlp));
  EXPECT_EQ(m.trainable_parameters, mlp->parameter_count());  // nothing frozen

  for (int64_t bad : {-1, -8}) {
    q.lora_rank = bad;
    expect_error([&] { validate_quant_options(q); },
                 {"--lora-rank", "positive", std::to_string(bad)});
    auto other = models::make_mlp(12, {8}, 3);
    expect_error([&] { prepare_model_for_finetuning(*other, nullptr, q, m); }, "--lora-rank");
  }
  // The image run refuses it before it loads any data.
  TrainOptions o;
  o.precision = "nf4";
  o.quant.lora_rank = -2;
  o.data_dir = "/nonexistent";
  expect_error([&] { run_training(o); }, "--lora-rank");
}

TEST(FinetuningInputs, LoraAlphaMustGiveAFiniteBoundedScaling) {
  QuantOptions q;
  q.lora_rank = 8;
  for (double bad : {1e30, 8000.5, 0.0, -4.0, std::nan(""), double(INFINITY)}) {
    q.lora_alpha = bad;
    expect_error([&] { validate_quant_options(q); },
                 {"--lora-alpha", "--lora-rank 8", "at most 1000 x --lora-rank (8000 here)"});
  }
  q.lora_alpha = 8000;  // scaling 1000, the largest accepted
  EXPECT_NO_THROW(validate_quant_options(q));
  // The image run refuses it before it loads any data (it would train to chance accuracy).
  TrainOptions o;
  o.precision = "nf4";
  o.quant.lora_rank = 8;
  o.quant.lora_alpha = 1e30;
  o.data_dir = "/nonexistent";
  expect_error([&] { run_training(o); }, {"--lora-alpha 1e+30", "scales the adapters by 1.25e+29"});
}

TEST(FinetuningInputs, InitFromTakesTrainerAndPlainCheckpoints) {
  TempDir dir;
  manual_seed(1);
  auto source = models::make_mlp(12, {8}, 3);
  // A Trainer checkpoint of `mantissa train --model mlp` ("model.net.*"), and a plain state dict.
  for (const char* prefix : {"model.net.", ""}) {
    const std::string path = save_prefixed(*source, prefix, dir.file("ckpt.safetensors"));
    manual_seed(2);
    auto target = models::make_mlp(12, {8}, 3);
    QuantOptions q;
    q.init_from = path;
    TrainMetrics m;
    prepare_model_for_finetuning(*target, nullptr, q, m);
    for (const auto& [name, t] : source->state_dict()) {
      EXPECT_EQ(target->state_dict().at(name).to_vector<float>(), t.to_vector<float>()) << name;
    }
  }
}

TEST(FinetuningInputs, InitFromAnotherModelOrShapeIsRefused) {
  TempDir dir;
  auto source = models::make_mlp(12, {8}, 3);
  const std::string path = save_prefixed(*source, "model.net.", dir.file("mlp.safetensors"));
  QuantOptions q;
  q.init_from = path;
  TrainMetrics m;
  // Same layers, another width: names match, shapes do not.
  auto wider = models::make_mlp(12, {16}, 3);
  expect_error([&] { prepare_model_for_finetuning(*wider, nullptr, q, m); },
               {"--init-from", "'0.weight'", "[8, 12]", "[16, 12]"});
  // Another model: a deeper MLP has tensors the file lacks.
  auto deeper = models::make_mlp(12, {8, 8}, 3);
  expect_error([&] { prepare_model_for_finetuning(*deeper, nullptr, q, m); },
               {"--init-from", "another model", "missing [4.weight, 4.bias]"});
  // A file that is not a checkpoint at all.
  expect_error(
      [&] {
        QuantOptions missing;
        missing.init_from = dir.file("nothing.safetensors");
        auto mlp = models::make_mlp(12, {8}, 3);
        prepare_model_for_finetuning(*mlp, nullptr, missing, m);
      },
      "nothing.safetensors");
}

// A long list of names that do not fit is cut after 8 with how many more (a QLoRA checkpoint
// given to --init-from listed some 90 names in one line of 8 KB).
TEST(FinetuningInputs, InitFromListsAtMostEightNames) {
  TempDir dir;
  auto source = models::make_mlp(12, {8, 8, 8, 8, 8, 8}, 3);  // layers 0, 2, ..., 12
  const std::string path = save_prefixed(*source, "model.net.", dir.file("deep.safetensors"));
  QuantOptions q;
  q.init_from = path;
  TrainMetrics m;
  auto target = models::make_mlp(12, {8}, 3);  // layers 0, 2: 10 tensors of the file are extra
  try {
    prepare_model_for_finetuning(*target, nullptr, q, m);
    ADD_FAILURE() << "another model was loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t list = what.find("unexpected [");
    ASSERT_NE(list, std::string::npos) << what;
    const std::string shown = what.substr(list);
    EXPECT_NE(shown.find(", ... and 2 more]"), std::string::npos) << what;
    EXPECT_EQ(std::count(shown.begin(), shown.end(), ','), 8) << what;  // 8 names, then "..."
    EXPECT_EQ(what.find("missing"), std::string::npos) << what;
  }
}

// A transformer-engine run's checkpoint is the same model with FP8 scaling state beside the
// weights ("0.fp8_scale", "0.fp8_amax_history"): --init-from takes the weights into a run of
// any precision and leaves the scaling state out. A file of another model is still refused,
// and the message lists only what is there ("missing []" said nothing).
TEST(FinetuningInputs, InitFromAnFp8CheckpointTakesItsWeights) {
  TempDir dir;
  manual_seed(4);
  auto source = models::make_mlp(64, {32}, 4);
  train::TransformerEnginePrecision te("transformer-engine");
  te.convert_module(*source);
  ASSERT_TRUE(source->state_dict().contains("0.fp8_scale"));
  ASSERT_TRUE(source->state_dict().contains("2.fp8_amax_history"));
  const std::string path = save_prefixed(*source, "model.net.", dir.file("fp8.safetensors"));
  for (const bool nf4 : {false, true}) {
    auto target = models::make_mlp(64, {32}, 4);
    QuantOptions q;
    q.init_from = path;
    TrainMetrics m;
    train::BitsandbytesPrecision plugin("nf4", kFloat32);
    prepare_model_for_finetuning(*target, nf4 ? &plugin : nullptr, q, m);
    if (nf4) continue;  // loaded before quantizing: no error is the point
    for (const std::string name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
      EXPECT_EQ(target->state_dict().at(name).to_vector<float>(),
                source->state_dict().at(name).to(kFloat32).to_vector<float>())
          << name;
    }
    EXPECT_FALSE(target->state_dict().contains("0.fp8_scale"));
  }
  TrainMetrics m;
  QuantOptions q;
  q.init_from = path;
  auto deeper = models::make_mlp(64, {32, 8}, 4);
  try {
    prepare_model_for_finetuning(*deeper, nullptr, q, m);
    ADD_FAILURE() << "another model was loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("another model"), std::string::npos) << what;
    EXPECT_NE(what.find("missing [4.weight, 4.bias]"), std::string::npos) << what;
    EXPECT_EQ(what.find("unexpected"), std::string::npos) << what;  // the FP8 state is no news
    EXPECT_EQ(what.find("[]"), std::string::npos) << what;
  }
}

// NaN or inf in the file is named before training, as --resume and eval do (not left to show
// up as "the loss became nan ... lower the learning rate").
TEST(FinetuningInputs, InitFromNonFiniteWeightsIsRefused) {
  TempDir dir;
  for (double bad : {std::nan(""), -HUGE_VAL}) {
    auto source = models::make_mlp(12, {8}, 3);
    io::NamedTensors tensors;
    for (const auto& [name, t] : source->state_dict()) {
      Tensor copy = t.detach().clone();
      if (name == "2.weight") {
        std::vector<float> v = copy.to_vector<float>();
        v[5] = static_cast<float>(bad);
        copy = tensor(v, copy.shape());
      }
      tensors.emplace_back("model.net." + name, copy);
    }
    const std::string path = dir.file("bad.safetensors");
    io::save_safetensors(path, tensors);
    auto target = models::make_mlp(12, {8}, 3);
    const std::vector<float> before = target->state_dict().at("0.weight").to_vector<float>();
    QuantOptions q;
    q.init_from = path;
    TrainMetrics m;
    expect_error([&] { prepare_model_for_finetuning(*target, nullptr, q, m); },
                 {"--init-from", "parameter '2.weight' holds a non-finite value", "damaged"});
    // Nothing was loaded.
    EXPECT_EQ(target->state_dict().at("0.weight").to_vector<float>(), before);
  }
}

TEST(FinetuningInputs, InitFromThenNf4WithLoraFreezesTheQuantizedWeights) {
  TempDir dir;
  manual_seed(3);
  auto source = models::make_mlp(64, {32}, 4);
  const std::string path = save_prefixed(*source, "model.net.", dir.file("mlp.safetensors"));
  auto target = models::make_mlp(64, {32}, 4);
  QuantOptions q;
  q.init_from = path;
  q.lora_rank = 4;
  train::BitsandbytesPrecision plugin("nf4", kFloat32);
  TrainMetrics m;
  prepare_model_for_finetuning(*target, &plugin, q, m);
  EXPECT_TRUE(has_lora(*target));
  // Adapters (A: r x in, B: out x r) and the biases train; the 4-bit weights do not.
  const int64_t adapters = 4 * 64 + 32 * 4 + 4 * 32 + 4 * 4;
  EXPECT_EQ(m.trainable_parameters, adapters + 32 + 4);
  EXPECT_EQ(m.total_parameters, adapters + 32 + 4 + 64 * 32 + 32 * 4);
  ASSERT_TRUE(m.quantized_bits_per_parameter.has_value());
  EXPECT_NEAR(*m.quantized_bits_per_parameter, 4.5, 1e-9);
  // The quantized model computes what the checkpoint's weights give, up to 4-bit rounding (a few
  // per cent in squared error; another model's weights would be off by about 2x).
  Generator gen(5);
  const Tensor x = randn({3, 64}, kFloat32, &gen);
  const auto want = source->forward(x).to_vector<float>();
  const auto got = target->forward(x).to_vector<float>();
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  EXPECT_LT(err, 0.1 * ref);
}

TEST(FinetuningInputs, Int8TrainingCountsItsTrainableWeightsOnce) {
  auto mlp = models::make_mlp(64, {32}, 4);
  const int64_t params = mlp->parameter_count();
  train::BitsandbytesPrecision plugin("int8-training", kFloat32);
  TrainMetrics m;
  prepare_model_for_finetuning(*mlp, &plugin, QuantOptions{}, m);
  EXPECT_EQ(m.total_parameters, params);
  EXPECT_EQ(m.trainable_parameters, params);
}

// 5 x 7 = 35 weights: one partial block of 64 and an odd count (the last byte's low nibble is
// padding), as bitsandbytes stores it.
TEST(FinetuningInputs, WeightNotAMultipleOfTheBlockIsPadded) {
  Generator gen(9);
  nn::Linear lin(7, 5, true, kFloat32, &gen);
  for (bool dq : {false, true}) {
    auto q = quant::Linear4bit::from_linear(lin, {FormatId::kNf4, dq, kFloat32, 64});
    const nn::StateDict sd = q->state_dict();
    EXPECT_EQ(sd.at("weight").shape(), (Shape{18, 1}));
    EXPECT_EQ(sd.at("weight.absmax").shape(), (Shape{1}));
    EXPECT_EQ(sd.at("weight").to_vector<uint8_t>().back() & 0x0F, 7);  // NF4's code of 0.0
    const Tensor x = randn({4, 7}, kFloat32, &gen);
    const auto want =
        nn::functional::linear(x, q->dequantized_weight(), q->bias).to_vector<float>();
    const auto got = q->forward(x).to_vector<float>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f);
    // The padded layer round-trips through a state dict.
    quant::Linear4bit back(7, 5, true, {FormatId::kNf4, dq, kFloat32, 64});
    back.load_state_dict(sd);
    EXPECT_EQ(back.dequantized_weight().to_vector<float>(),
              q->dequantized_weight().to_vector<float>());
  }
}

TEST(FinetuningInputs, CorruptedQuantStateInAFileIsAClearError) {
  TempDir dir;
  Generator gen(4);
  nn::Linear lin(80, 48, true, kFloat32, &gen);
  auto q = quant::Linear4bit::from_linear(lin, {FormatId::kNf4, true, kFloat32, 64});
  const std::string state_key = "weight.quant_state.bitsandbytes__nf4";
  // Writes the layer's tensors with one replaced, reads the file back and loads it.
  auto load_with = [&](const std::string& key, const Tensor& replacement) {
    io::NamedTensors tensors;
    for (const auto& [name, t] : q->state_dict())
      tensors.emplace_back(name, name == key ? replacement : t);
    io::save_safetensors(dir.file("layer.safetensors"), tensors);
    nn::StateDict sd;
    for (const auto& [name, t] : io::load_safetensors(dir.file("layer.safetensors")).tensors)
      sd.insert(name, t);
    quant::Linear4bit layer(80, 48, true, {FormatId::kNf4, true, kFloat32, 64});
    layer.load_state_dict(sd);
  };
  EXPECT_NO_THROW(load_with("", Tensor()));
  std::string js = R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [48,)";
  expect_error([&] { load_with(state_key, from_buffer(js.data(), kUInt8, {int64_t(js.size())})); },
               "not valid JSON");
  // Fewer absmax bytes than the shape has blocks (60 blocks of 64).
  expect_error([&] { load_with("weight.absmax", zeros({59}, kUInt8)); }, "absmax");
  // Fewer packed bytes than the shape needs.
  expect_error([&] { load_with("weight", zeros({1919, 1}, kUInt8)); }, "weight");
}

// --quant-dtype takes bf16, fp16 or fp32; the dtypes' other names (bfloat16, the spelling of
// --precision's dtypes elsewhere) and near misses name the value meant (it listed the three
// only).
TEST(QuantOptions, BadQuantDtypeNamesTheValueMeant) {
  for (const auto& [given, meant] :
       std::vector<std::pair<std::string, std::string>>{{"bfloat16", "bf16"},
                                                        {"float16", "fp16"},
                                                        {"half", "fp16"},
                                                        {"float32", "fp32"},
                                                        {"BF16", "bf16"},
                                                        {"fp-16", "fp16"}}) {
    SCOPED_TRACE(given);
    QuantOptions q;
    q.quant_dtype = given;
    testing::expect_error([&] { make_quant_plugin("nf4", q); },
                          {"--quant-dtype must be bf16, fp16 or fp32, got '" + given +
                           "' (did you mean '" + meant + "'?)"});
  }
  QuantOptions q;
  q.quant_dtype = "int4";
  testing::expect_error([&] { make_quant_plugin("nf4", q); },
                        {"--quant-dtype must be bf16, fp16 or fp32, got 'int4'"});
  q.quant_dtype = "fp32";
  EXPECT_NE(make_quant_plugin("nf4", q), nullptr);
}

}  // namespace
}  // namespace mantissa::recipes
