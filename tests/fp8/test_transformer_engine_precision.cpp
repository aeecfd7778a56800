// The "transformer-engine" precision plugin: options, layer replacement and its
// no-double-replacement rule, the exclusion list, the step scope, and checkpoint state.
#include "mantissa/train/precisions/transformer_engine_precision.h"

#include <gtest/gtest.h>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/warning.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/layer_norm.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/trainer.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "train/fp8_resume_check.h"
#include "train/tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::vals;

TEST(TransformerEnginePrecision, NamesAndDtypes) {
  TransformerEnginePrecision bf16("transformer-engine");
  EXPECT_EQ(bf16.precision(), "transformer-engine");
  EXPECT_EQ(bf16.param_dtype(), kBFloat16);
  TransformerEnginePrecision f16("transformer-engine-float16");
  EXPECT_EQ(f16.param_dtype(), kFloat16);
  EXPECT_EQ(f16.scaler(), nullptr);  // as Lightning: no loss scaler
  EXPECT_THROW(TransformerEnginePrecision("transformer-engine-fp32"), Error);
  EXPECT_EQ(bf16.recipe(), fp8::DelayedScaling{});
}

TEST(TransformerEnginePrecision, OptionsFromSettings) {
  const TransformerEngineOptions o =
      transformer_engine_options_from({{"fp8_format", "E4M3"},
                                       {"fp8_amax_history_len", "16"},
                                       {"fp8_amax_compute_algo", "most_recent"},
                                       {"fp8_margin", "1"},
                                       {"fp8_exclude", "head,h0.mlp.fc2"}});
  EXPECT_EQ(o.recipe.fp8_format, fp8::Format::kE4M3);
  EXPECT_EQ(o.recipe.amax_history_len, 16);
  EXPECT_EQ(o.recipe.amax_compute_algo, fp8::AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(o.recipe.margin, 1);
  EXPECT_EQ(o.exclude, (std::vector<std::string>{"head", "h0.mlp.fc2"}));
  // Spaces around the names are ignored; an empty name ("", "net.0,", "a,,b") is refused.
  EXPECT_EQ(transformer_engine_options_from({{"fp8_exclude", " h0 , h1"}}).exclude,
            (std::vector<std::string>{"h0", "h1"}));
  for (const char* bad : {"", "net.0,", ",net.0", "a,,b", " , "}) {
    SCOPED_TRACE(bad);
    expect_error(
        [&] {
          transformer_engine_options_from({{"fp8_exclude", bad}});
        },
        "has an empty module name");
  }
  EXPECT_THROW(transformer_engine_options_from({{"fp8_format", "E5M2"}}), Error);
  EXPECT_THROW(transformer_engine_options_from({{"fp8_amax_history_len", "0"}}), Error);
  EXPECT_THROW(transformer_engine_options_from({{"fp8_amax_history_len", "ten"}}), Error);
  EXPECT_THROW(transformer_engine_options_from({{"fp8_amax_compute_algo", "mean"}}), Error);
  EXPECT_THROW(transformer_engine_options_from({{"fp8_interval", "1"}}), Error);
  // Bounds: a margin past E4M3's span would flush (or saturate) every value, and a history
  // beyond any run's length only fills memory.
  EXPECT_EQ(transformer_engine_options_from({{"fp8_margin", "-16"}}).recipe.margin, -16);
  expect_error(
      [] {
        transformer_engine_options_from({{"fp8_margin", "17"}});
      },
      {"margin 17 is outside [-16, 16]", "flush to zero"});
  expect_error(
      [] {
        transformer_engine_options_from({{"fp8_margin", "-1000"}});
      },
      "margin -1000 is outside");
  expect_error(
      [] {
        transformer_engine_options_from({{"fp8_amax_history_len", "100000000000"}});
      },
      {"amax_history_len 100000000000", "at most 1048576"});
}

// Excluding every Linear leaves nothing in FP8: said, since the precision's name says FP8.
TEST(TransformerEnginePrecision, ExcludingEveryLinearWarns) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  TransformerEngineOptions o;
  o.exclude = {"0", "2"};
  TransformerEnginePrecision all_out("transformer-engine", o);
  WarningRecorder recorder;
  all_out.convert_module(*model);
  ASSERT_EQ(recorder.messages().size(), 1u);
  EXPECT_NE(recorder.messages()[0].find("no layer of Sequential runs in FP8 (fp8_exclude keeps "
                                        "out every Linear layer: 0,2)"),
            std::string::npos)
      << recorder.messages()[0];
  // One Linear left: no warning.
  auto model2 = std::make_shared<nn::Sequential>();
  model2->push_back(std::make_shared<nn::Linear>(16, 32));
  model2->push_back(std::make_shared<nn::Linear>(32, 4));
  o.exclude = {"0"};
  TransformerEnginePrecision one_out("transformer-engine", o);
  WarningRecorder quiet;
  one_out.convert_module(*model2);
  EXPECT_TRUE(quiet.messages().empty());
}

// Made by the registry on a CPU, the precision says it emulates FP8 once a layer runs in FP8;
// a model that fp8_exclude leaves without one is told that instead.
TEST(TransformerEnginePrecision, SaysItEmulatesFp8OnlyWhenALayerRunsInFp8) {
  auto two_linears = [] {
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(16, 32));
    model->push_back(std::make_shared<nn::Linear>(32, 4));
    return model;
  };
  forget_warnings_said_once();
  {
    WarningRecorder recorder;
    auto all_out = make_precision("transformer-engine", {.extra = {{"fp8_exclude", "0,1"}}});
    all_out->convert_module(*two_linears());
    ASSERT_EQ(recorder.messages().size(), 1u);
    EXPECT_NE(recorder.messages()[0].find("no layer of Sequential runs in FP8"), std::string::npos)
        << recorder.messages()[0];
  }
  {
    WarningRecorder recorder;
    auto one_in = make_precision("transformer-engine", {.extra = {{"fp8_exclude", "0"}}});
    one_in->convert_module(*two_linears());
    ASSERT_EQ(recorder.messages().size(), 1u);
    EXPECT_NE(recorder.messages()[0].find("precision 'transformer-engine' is emulated on this CPU"),
              std::string::npos)
        << recorder.messages()[0];
  }
  forget_warnings_said_once();
}

// A name to exclude that names no layer is an error listing the nearest names.
TEST(TransformerEnginePrecision, ExcludingAnUnknownLayerIsAnError) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  TransformerEngineOptions o;
  o.exclude = {"22"};
  TransformerEnginePrecision p("transformer-engine", o);
  expect_error([&] { p.convert_module(*model); },
               {"fp8_exclude names '22', but the model", "no such layer", "closest names: 2"});
}

// match_fp8_exclude, which check_fp8_exclude and finetune's --fp8-exclude check share: the
// names that match no module in their order, and every module name (a shared module under both
// of its names, the root left out) for the hint.
TEST(TransformerEnginePrecision, MatchFp8ExcludeListsUnmatchedNamesAndEveryModuleName) {
  auto shared = std::make_shared<nn::Linear>(8, 8);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(shared);
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(shared);
  const Fp8ExcludeMatch match = match_fp8_exclude(*model, {"x", "2", "0", "lm_head"});
  EXPECT_EQ(match.unmatched, (std::vector<std::string>{"x", "lm_head"}));
  EXPECT_EQ(match.names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(match_fp8_exclude(*model, {}).unmatched.empty());
}

// A name of a module that holds no layer that runs in FP8 (here a ReLU, a block of two) changes
// nothing and is refused; a block holding a Linear is kept. An unmatched short name is hinted
// with the modules it ends (as a LoRA target matches), not with the names spelt closest.
TEST(TransformerEnginePrecision, ExcludeOfALayerThatNeverRunsInFp8IsRefusedAndShortNamesHinted) {
  auto block = [] {
    auto b = std::make_shared<nn::Sequential>();
    b->push_back(std::make_shared<nn::Linear>(8, 8));
    b->push_back(std::make_shared<nn::ReLU>());
    return b;
  };
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(block());
  model->push_back(block());
  model->push_back(std::make_shared<nn::ReLU>());
  const Fp8ExcludeMatch match = match_fp8_exclude(*model, {"0", "1.1", "2", "0.0"});
  EXPECT_TRUE(match.unmatched.empty());
  EXPECT_EQ(match.idle, (std::vector<std::string>{"1.1", "2"}));
  EXPECT_EQ(match.candidates("1"), (std::vector<std::string>{"0.1", "1.1"}));
  expect_error(
      [&] {
        check_fp8_exclude(*model, {"0", "2"});
      },
      {"fp8_exclude names '2', which holds no layer that runs in FP8"});
  check_fp8_exclude(*model, {"0", "1.0"});
}

// The names are checked before any layer is replaced: a refused call leaves the model as it
// was (no FP8 layer, no dtype change), so a retry with the corrected list converts it and
// keeps the excluded layer (rather than finding the layers already FP8 and replacing nothing).
TEST(TransformerEnginePrecision, RefusedExcludeLeavesTheModelUnchangedForARetry) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  TransformerEngineOptions bad;
  bad.exclude = {"head"};
  TransformerEnginePrecision p1("transformer-engine", bad);
  expect_error([&] { p1.convert_module(*model); }, {"fp8_exclude names 'head'"});
  EXPECT_FALSE(holds_fp8_layers(*model));
  EXPECT_NE(model->at<nn::Linear>(0), nullptr);
  EXPECT_NE(model->at<nn::Linear>(2), nullptr);
  EXPECT_EQ(model->parameters()[0].dtype(), kFloat32);

  TransformerEngineOptions good;
  good.exclude = {"2"};
  TransformerEnginePrecision p2("transformer-engine", good);
  p2.convert_module(*model);
  EXPECT_EQ(p2.replaced_layers(), 1);
  EXPECT_NE(std::dynamic_pointer_cast<fp8::Linear>((*model)[0]), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<nn::Linear>((*model)[2]), nullptr);  // excluded
}

// fp8_exclude may name a shared Linear by any of its slots' names, as its state_dict keys do:
// "2" (the second slot of the Linear at "0") keeps it out of FP8 in both slots, although
// named_modules() lists it as "0" only.
TEST(TransformerEnginePrecision, ExcludeAcceptsASharedLinearsSecondName) {
  auto model = std::make_shared<nn::Sequential>();
  auto shared = std::make_shared<nn::Linear>(16, 16);
  model->push_back(shared);
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(shared);
  model->push_back(std::make_shared<nn::Linear>(16, 4));
  TransformerEngineOptions o;
  o.exclude = {"2"};
  TransformerEnginePrecision p("transformer-engine", o);
  p.convert_module(*model);
  EXPECT_EQ(p.replaced_layers(), 1);
  EXPECT_EQ((*model)[0], shared);
  EXPECT_EQ((*model)[2], shared);
  EXPECT_NE(std::dynamic_pointer_cast<fp8::Linear>((*model)[3]), nullptr);
}

TEST(TransformerEnginePrecision, ModelWithFp8LayersIsLeftAlone) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<fp8::Linear>(16, 16, true, kFloat32, 8));
  model->push_back(std::make_shared<nn::Linear>(16, 4));
  TransformerEngineOptions o;
  o.recipe.amax_history_len = 4;
  TransformerEnginePrecision p("transformer-engine", o);
  p.convert_module(*model);
  EXPECT_EQ(p.replaced_layers(), 0);
  EXPECT_NE(model->at<nn::Linear>(1), nullptr);
  EXPECT_EQ(model->parameters()[0].dtype(), kBFloat16);
  // The FP8 layer follows the recipe's history length.
  EXPECT_EQ(model->at<fp8::Linear>(0)->fp8_state()->history_len(), 4);
}

// A model quantized by BitsandbytesPrecision is refused: its 4-bit layers are no nn::Linear,
// so they would stay as they are beside the FP8 layers and the run would train a mix under the
// name transformer-engine.
TEST(TransformerEnginePrecision, AQuantizedModelIsRefused) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(64, 16));
  model->push_back(std::make_shared<nn::Linear>(16, 4));
  BitsandbytesPrecision("nf4-dq", kFloat32, {"1"}).convert_module(*model);
  TransformerEnginePrecision p("transformer-engine");
  expect_error([&] { p.convert_module(*model); },
               "the model (Sequential) holds layers quantized by BitsandbytesPrecision (0 "
               "(nf4-dq)); the FP8 precision replaces nn::Linear layers");
  EXPECT_EQ(p.replaced_layers(), 0);
  EXPECT_NE(model->at<nn::Linear>(1), nullptr);  // left as it was
  EXPECT_EQ(model->at<nn::Linear>(1)->weight.dtype(), kFloat32);
}

// A converted model's state dict into a plain model, and a plain one into a converted model:
// the error says that FP8 scaling state is what differs and how to load anyway.
TEST(TransformerEnginePrecision, LoadingAcrossFp8ConversionSaysWhatToDo) {
  auto make = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(16, 4));
    return m;
  };
  auto fp8 = make();
  TransformerEnginePrecision("transformer-engine").convert_module(*fp8);
  expect_error([&] { make()->load_state_dict(fp8->state_dict()); },
               {"unexpected keys: \"0.fp8_scale\"",
                "hint: the state dict holds FP8 scaling state (\"0.fp8_scale\"), the module has "
                "no FP8 layers: convert it with train::TransformerEnginePrecision first, or load "
                "with strict=false"});
  expect_error([&] { fp8->load_state_dict(make()->state_dict()); },
               "hint: the module has FP8 layers (\"0.fp8_scale\"), the state dict no FP8 "
               "scaling state: load it before converting the module, or with strict=false");
  make()->load_state_dict(fp8->state_dict(), /*strict=*/false);  // the weights alone
}

TEST(TransformerEnginePrecision, StepScopeEnablesFp8WithTheRecipe) {
  TransformerEngineOptions o;
  o.recipe.margin = 2;
  TransformerEnginePrecision p("transformer-engine", o);
  EXPECT_FALSE(fp8::fp8_enabled());
  {
    ScopePtr s = p.forward_context();
    EXPECT_TRUE(fp8::fp8_enabled());
    EXPECT_EQ(fp8::fp8_recipe().margin, 2);
  }
  EXPECT_FALSE(fp8::fp8_enabled());
}

TEST(TransformerEnginePrecision, StateDictRestoresMetaAndChecksRecipe) {
  auto make = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<fp8::Linear>(8, 8, true, kFloat32, 4));
    m->push_back(std::make_shared<fp8::Linear>(8, 2, true, kFloat32, 4));
    return m;
  };
  TransformerEngineOptions o;
  o.recipe.amax_history_len = 4;
  auto a = make();
  TransformerEnginePrecision pa("transformer-engine", o);
  pa.convert_module(*a);
  for (int step = 0; step < 3; ++step) {
    Tensor y;
    {
      ScopePtr s = pa.forward_context();
      y = (*a)(randn({4, 8}).to(kBFloat16));
    }
    sum(y).backward();
  }
  const nlohmann::json state = pa.state_dict();
  EXPECT_EQ(state["recipe"]["amax_history_len"], 4);
  ASSERT_TRUE(state["fp8_meta"].contains("1"));
  auto b = make();
  TransformerEnginePrecision pb("transformer-engine", o);
  pb.convert_module(*b);
  pb.load_state_dict(state);
  for (const char* i : {"0", "1"}) {
    EXPECT_EQ(pb.state_dict()["fp8_meta"][i], state["fp8_meta"][i]) << i;
  }
  const auto stats = pa.take_stats();
  EXPECT_EQ(stats.at("0").at("input").casts, 3 * 4 * 8);
  EXPECT_EQ(stats.at("1").at("grad_output").casts, 3 * 4 * 2);
  EXPECT_EQ(pa.take_stats().at("0").at("input").casts, 0);
  TransformerEngineOptions other = o;
  other.recipe.margin = 1;
  TransformerEnginePrecision pc("transformer-engine", other);
  auto c = make();
  pc.convert_module(*c);
  EXPECT_THROW(pc.load_state_dict(state), Error);
}

}  // namespace
}  // namespace mantissa::train

#include "mantissa/models/gpt.h"
#include "mantissa/models/mlp.h"
#include "mantissa/nn/replace.h"
#include "mantissa/ops/loss.h"
#include "mantissa/optim/adamw.h"

namespace mantissa::train {
namespace {

TEST(TransformerEnginePrecision, ReplacesLinearAndLayerNormKeepingNamesAndTensors) {
  auto model = std::make_shared<nn::Sequential>();
  auto fc = model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{32}));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  const Tensor w0 = fc->weight;
  std::vector<std::string> before;
  for (const auto& [n, t] : model->named_parameters()) before.push_back(n);
  TransformerEngineOptions o;
  o.recipe.amax_history_len = 4;
  o.exclude = {"3"};
  TransformerEnginePrecision p("transformer-engine", o);
  p.convert_module(*model);
  EXPECT_EQ(p.replaced_layers(), 2);
  EXPECT_NE(std::dynamic_pointer_cast<fp8::Linear>((*model)[0]), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<fp8::LayerNorm>((*model)[1]), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<nn::Linear>((*model)[3]), nullptr);  // excluded
  std::vector<std::string> after;
  for (const auto& [n, t] : model->named_parameters()) after.push_back(n);
  EXPECT_EQ(after, before);
  EXPECT_TRUE(std::dynamic_pointer_cast<fp8::Linear>((*model)[0])->weight.is_same(w0));
  EXPECT_EQ(w0.dtype(), kBFloat16);
  // Converting again replaces nothing: the model now holds FP8 layers.
  TransformerEnginePrecision again("transformer-engine", o);
  again.convert_module(*model);
  EXPECT_EQ(again.replaced_layers(), 0);
}

// LoRALinear::merge over an FP8 base: fp8::Linear keeps its weight in the weights dtype (bf16
// here) and casts it to FP8 for each product, so the adapter merges into that weight. The
// write bumps the weight's
// version, which the FP8 cast cache is keyed on, so the next product casts the merged weight;
// unmerge subtracts it again, and merge_and_unload leaves the FP8 layer in the slot.
TEST(TransformerEnginePrecision, LoraMergesIntoAnFp8BasesWeight) {
  manual_seed(3);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 8));
  nn::LoraConfig config;
  config.r = 2;
  config.alpha = 4;
  nn::apply_lora(*model, config);
  auto lora = model->at<nn::LoRALinear>(0);
  {
    NoGradGuard no_grad;  // B starts at zero: give the adapter something to merge
    Tensor(lora->lora_B()->weight).copy_(randn({8, 2}));
  }
  TransformerEnginePrecision p("transformer-engine");
  p.convert_module(*model);
  auto base = std::dynamic_pointer_cast<fp8::Linear>(lora->base_layer());
  ASSERT_NE(base, nullptr);
  const Tensor before = base->weight.clone();
  const Tensor delta =
      mul(matmul(lora->lora_B()->weight.to(kFloat64), lora->lora_A()->weight.to(kFloat64)),
          2.0);  // scaling alpha / r
  const Tensor want = add(before.to(kFloat64), delta).to(kBFloat16);
  const Tensor x = randn({4, 16}).to(kBFloat16);
  const Tensor y_adapter = lora->forward(x);
  const uint64_t version = base->weight.storage()->version();
  lora->merge();
  EXPECT_TRUE(lora->merged());
  EXPECT_EQ(base->weight.dtype(), kBFloat16);
  EXPECT_EQ(vals(base->weight), vals(want));
  EXPECT_GT(base->weight.storage()->version(), version);  // the FP8 cast cache is stale
  mantissa::testing::expect_near_all(vals(lora->forward(x)), vals(y_adapter), 0.1);
  lora->unmerge();
  mantissa::testing::expect_near_all(vals(base->weight), vals(before), 0.02);
  EXPECT_EQ(nn::merge_and_unload(*model), (std::vector<std::string>{"0"}));
  EXPECT_EQ((*model)[0], base);
  mantissa::testing::expect_near_all(vals(base->weight), vals(want), 0.02);
}

// The adapters (lora_A, lora_B) made FP8 modules by earlier versions never cast anything
// (LoRALinear did not run its slots' modules then): their scales and 1024-row amax histories were
// dead state in every checkpoint (and the plugin's metadata). The plugin now leaves them plain, as
// the bitsandbytes plugin does; the base layers go FP8 as before. A state dict of that earlier
// layout (adapters with fp8_scale and fp8_amax_history) still loads strictly.
TEST(TransformerEnginePrecision, LoraAdaptersStayPlainAndOldAdapterStateLoads) {
  auto make = [] {
    manual_seed(1);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(16, 32));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(32, 4));
    nn::LoraConfig lora;
    lora.r = 2;
    nn::apply_lora(*model, lora);
    TransformerEngineOptions o;
    o.recipe.amax_history_len = 4;
    auto p = std::make_shared<TransformerEnginePrecision>("transformer-engine", o);
    p->convert_module(*model);
    return std::make_pair(model, p);
  };
  auto [model, plugin] = make();
  EXPECT_EQ(plugin->replaced_layers(), 2);  // the two base layers
  for (const auto& [name, m] : model->named_modules()) {
    const bool fp8 = dynamic_cast<fp8::Linear*>(m) != nullptr;
    if (name.ends_with("base_layer")) {
      EXPECT_TRUE(fp8) << name;
    } else if (name.ends_with("lora_A") || name.ends_with("lora_B")) {
      EXPECT_FALSE(fp8) << name;
      EXPECT_NE(dynamic_cast<nn::Linear*>(m), nullptr) << name;
    }
  }
  const nn::StateDict state = model->state_dict();
  for (const auto& [key, t] : state) EXPECT_EQ(key.find("lora_A.fp8"), std::string::npos) << key;
  for (const auto& [key, t] : state) EXPECT_EQ(key.find("lora_B.fp8"), std::string::npos) << key;
  EXPECT_EQ(plugin->state_dict().at("fp8_meta").size(), 2u);  // 0.base_layer, 2.base_layer
  // The adapters still train in the weights dtype: the forward runs and gives gradients.
  {
    ScopePtr scope = plugin->forward_context();
    Tensor y = model->forward(randn({8, 16}).to(kBFloat16));
    sum(y.to(kFloat32)).backward();
  }
  for (const auto& [name, t] : model->named_parameters()) {
    if (name.find("lora_") == std::string::npos) continue;
    EXPECT_EQ(t.dtype(), kBFloat16) << name;
    EXPECT_TRUE(t.grad().defined()) << name;
  }

  // The earlier layout: each adapter with its FP8 state. It loads, strictly, into the plain
  // adapters, and the weights are the file's.
  nn::StateDict old = state;
  for (const char* layer : {"0", "2"}) {
    for (const char* adapter : {"lora_A", "lora_B"}) {
      const std::string at = std::string(layer) + "." + adapter + ".";
      old.insert(at + "fp8_scale", ones({3}, kFloat32));
      old.insert(at + "fp8_amax_history", zeros({4, 3}, kFloat32));
    }
  }
  auto [other, other_plugin] = make();
  other->load_state_dict(old, /*strict=*/true);
  const nn::StateDict loaded = other->state_dict();
  for (const auto& [key, t] : state) {
    ASSERT_TRUE(loaded.contains(key)) << key;
    EXPECT_EQ(loaded.at(key).to_vector<double>(), t.to_vector<double>()) << key;
  }
  // So does the plugin's metadata of that layout, which listed the adapters too.
  nlohmann::json meta = plugin->state_dict();
  meta["fp8_meta"]["0.lora_A"] = meta["fp8_meta"]["0.base_layer"];
  other_plugin->load_state_dict(meta);
}

TEST(TransformerEnginePrecision, TinyGptLossFallsWithFp8Layers) {
  manual_seed(0);
  models::GPT gpt({.context = 16, .layers = 2, .width = 32, .heads = 4, .dtype = kFloat32});
  TransformerEngineOptions o;
  o.recipe.amax_history_len = 16;
  TransformerEnginePrecision p("transformer-engine", o);
  p.convert_module(gpt);
  EXPECT_GT(p.replaced_layers(), 4);
  optim::AdamW opt(gpt.parameters(), 3e-3);
  std::vector<int64_t> ids(4 * 17);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % 50);
  const Tensor seq = tensor(ids, {4, 17});
  const Tensor x = seq.narrow(1, 0, 16).contiguous(), y = seq.narrow(1, 1, 16).contiguous();
  double first = 0, last = 0;
  for (int s = 0; s < 40; ++s) {
    Tensor loss;
    {
      ScopePtr scope = p.forward_context();
      loss = models::GPT::loss(gpt.forward(x), y);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (s == 0) first = loss.item();
    last = loss.item();
  }
  EXPECT_LT(last, 0.7 * first) << first << " -> " << last;
}

// tests/train/fp8_resume_check.h says what this checks and why.
TEST(TransformerEnginePrecision, ResumeAfterAMaxStepsStopMidEpochIsBitExact) {
  testing::expect_fp8_resume_bit_exact("cpu");
}

// A resume with another recipe or other FP8 layers is said as that, naming the flag, before
// the tensors that then differ (a shape mismatch of fp8_amax_history, unexpected fp8_scale).
TEST(TransformerEnginePrecision, ResumeWithAnotherRecipeOrExclusionNamesTheFlag) {
  mantissa::testing::TempDir dir;
  auto run = [&](const std::map<std::string, std::string>& recipe, const std::string& resume) {
    TrainerOptions o = testing::quiet_options("transformer-engine");
    o.max_epochs = resume.empty() ? 1 : 2;
    o.seed = 3;
    o.precision_options = recipe;
    ModelCheckpointOptions mc;
    mc.dirpath = dir.str();
    mc.save_top_k = 0;
    mc.save_last = true;
    if (resume.empty()) o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
    Trainer trainer(o);
    testing::TinyModule module({.adamw = true});
    data::DataLoader train(testing::tiny_dataset(32), 8);
    trainer.fit(module, train, nullptr, resume);
  };
  run({{"fp8_amax_history_len", "16"}}, "");
  const std::string last = dir.file("last.safetensors");
  expect_error(
      [&] {
        run({{"fp8_amax_history_len", "8"}}, last);
      },
      {"the checkpoint was trained with DelayedScaling(", "amax_history_len=16",
       "amax_history_len=8", "--fp8-amax-history-len (checkpoint: 16; this run: 8)",
       "resume with the checkpoint's --fp8-* options"});
  expect_error(
      [&] {
        run({{"fp8_amax_history_len", "16"}, {"fp8_exclude", "net.2"}}, last);
      },
      {"the layers in FP8 differ from the checkpoint's (FP8 in the checkpoint but not "
       "here: net.2)",
       "--fp8-exclude must match"});
  run({{"fp8_amax_history_len", "16"}}, last);  // the same options resume
}

}  // namespace
}  // namespace mantissa::train
