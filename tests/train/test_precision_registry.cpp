// The precision registry: the table and what is generated from it (names, aliases, help text,
// planned names), registering a plugin from outside the library, plugin options, and a
// registered plugin with real state: convert_module at Trainer setup, its state in checkpoints,
// and the error when a checkpoint holds state for another precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::expect_error;
using testing::quiet_options;
using testing::TinyModule;

TEST(PrecisionRegistry, ListsEachPrecisionOnceWithAWorkingPlugin) {
  EXPECT_EQ(
      supported_precisions(),
      (std::vector<std::string>{"32-true", "64-true", "16-mixed", "bf16-mixed", "16-true",
                                "bf16-true", "transformer-engine", "transformer-engine-float16",
                                "nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "int8-training"}));
  EXPECT_TRUE(planned_precisions().empty());
  EXPECT_EQ(supported_precisions_text(),
            "32-true, 64-true, 16-mixed, bf16-mixed, 16-true, bf16-true, transformer-engine, "
            "transformer-engine-float16, nf4, nf4-dq, fp4, fp4-dq, int8 or int8-training");
  std::set<std::string> names;
  for (const auto& e : precision_registry()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    for (const auto& a : e.aliases) EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_FALSE(e.description.empty()) << e.name;
    EXPECT_EQ(e.implemented, e.make != nullptr) << e.name;
    if (!e.implemented) continue;
    EXPECT_NE(std::find(e.accelerators.begin(), e.accelerators.end(), "cpu"), e.accelerators.end());
    EXPECT_EQ(make_precision(e.name)->precision(), e.name);
    EXPECT_EQ(precision_param_dtype(e.name), make_precision(e.name)->param_dtype());
    EXPECT_EQ(find_precision(e.name), &e);
    for (const auto& a : e.aliases) EXPECT_EQ(find_precision(a.name), &e) << a.name;
  }
  EXPECT_EQ(find_precision("fp7"), nullptr);
  EXPECT_EQ(precision_param_dtype("bf16-true"), kBFloat16);
  EXPECT_EQ(precision_param_dtype("16-mixed"), kFloat32);
}

// Every implemented precision of the table trains the tiny model (the list is the registry's,
// so a newly registered precision is covered without editing this test).
TEST(PrecisionRegistry, EveryImplementedPrecisionTrains) {
  for (const std::string& name : supported_precisions()) {
    TrainerOptions o = quiet_options(name);
    o.seed = 3;
    o.max_steps = 2;
    o.max_epochs = -1;
    Trainer trainer(o);
    TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(32), 8);
    trainer.fit(module, loader);
    ASSERT_EQ(trainer.step_losses().size(), 2u) << name;
    for (double l : trainer.step_losses()) EXPECT_TRUE(std::isfinite(l)) << name;
    EXPECT_EQ(trainer.precision_plugin().precision(), name);
    for (const Tensor& p : module.parameters())
      EXPECT_EQ(p.dtype(), trainer.precision_plugin().param_dtype()) << name;
  }
}

// Looking up the parameter dtype of a checkpoint's precision runs nothing: no "emulated on this
// CPU" warning (a 16-mixed checkpoint resumed under 32-true printed one about 16-mixed).
TEST(PrecisionRegistry, ParamDtypeLookupSaysNothing) {
  forget_warnings_said_once();
  WarningRecorder recorder;
  EXPECT_EQ(precision_param_dtype("16-mixed"), kFloat32);
  EXPECT_EQ(precision_param_dtype("16-true"), kFloat16);
  EXPECT_EQ(precision_param_dtype("bf16-true"), kBFloat16);
  EXPECT_TRUE(recorder.messages().empty()) << recorder.messages().front();
  EXPECT_THROW(precision_param_dtype("17-mixed"), Error);
}

TEST(PrecisionRegistry, PluginsRejectOptionsTheyDoNotKnow) {
  PrecisionOptions o;
  o.extra["fp8_recipe"] = "delayed";
  expect_error([&] { make_precision("bf16-mixed", o); },
               {"precision 'bf16-mixed' has no option 'fp8_recipe'", "it takes none"});
  TrainerOptions t = quiet_options("32-true");
  t.precision_options["ignore_modules"] = "head";
  expect_error([&] { Trainer trainer(t); }, "has no option 'ignore_modules'");
}

// A plugin with state of its own: it counts optimizer steps, remembers the losses it saw and
// records convert_module calls (it also halves nothing: training is unchanged).
class StatefulPrecision : public Precision {
 public:
  explicit StatefulPrecision(std::string tag) : tag_(std::move(tag)) {}
  std::string precision() const override { return "test-stateful"; }
  std::string class_name() const override { return "StatefulPrecision"; }
  void convert_module(nn::Module& module) override {
    converted.push_back(module.name());
    modules_seen = static_cast<int>(module.named_modules().size());
  }
  bool optimizer_step(optim::Optimizer& optimizer, const std::function<Tensor()>& closure,
                      const std::function<void()>& after_closure) override {
    const bool stepped = Precision::optimizer_step(
        optimizer,
        [&] {
          Tensor loss = closure();
          if (loss.defined()) losses.push_back(loss.item());
          return loss;
        },
        after_closure);
    steps += stepped ? 1 : 0;
    return stepped;
  }
  nlohmann::json state_dict() const override {
    return {{"steps", steps}, {"losses", losses}, {"tag", tag_}};
  }
  void load_state_dict(const nlohmann::json& state) override {
    MANTISSA_CHECK(state.contains("steps") && state.contains("losses"), "StatefulPrecision",
                   "state lacks 'steps' or 'losses': {}", state.dump());
    steps = state.at("steps").get<int64_t>();
    losses = state.at("losses").get<std::vector<double>>();
  }

  int64_t steps = 0;
  std::vector<double> losses;
  std::vector<std::string> converted;
  int modules_seen = 0;

 private:
  std::string tag_;
};

// Registers the test plugin for one test ("tag" is its one option).
class ScopedStatefulPrecision {
 public:
  ScopedStatefulPrecision() {
    register_precision({.name = "test-stateful",
                        .description = "test plugin with state",
                        .make = [](const PrecisionOptions& o) -> std::unique_ptr<Precision> {
                          check_precision_options(o, {"tag"});
                          auto it = o.extra.find("tag");
                          return std::make_unique<StatefulPrecision>(
                              it == o.extra.end() ? "" : it->second);
                        },
                        .aliases = {{"stateful", "`stateful` is a test alias"}}});
  }
  ~ScopedStatefulPrecision() { unregister_precision("test-stateful"); }
};

TEST(PrecisionRegistry, RegisteredPluginsJoinEveryList) {
  {
    ScopedStatefulPrecision scoped;
    const auto names = supported_precisions();
    EXPECT_EQ(names.back(), "test-stateful");  // after the built-in ones, before planned ones
    EXPECT_EQ(supported_precisions_text().substr(supported_precisions_text().size() - 30),
              "int8-training or test-stateful");
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(normalize_precision("stateful"), "test-stateful");
    EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                  "mantissa: warning: `stateful` is a test alias"),
              std::string::npos);
    PrecisionOptions o;
    o.extra["tag"] = "x";
    EXPECT_EQ(make_precision("test-stateful", o)->state_dict()["tag"], "x");
    expect_error([] { register_precision({.name = "test-stateful", .make = make_true_precision}); },
                 "already registered");
    expect_error(
        [] {
          register_precision(
              {.name = "other", .make = make_true_precision, .aliases = {{"16", ""}}});
        },
        "alias '16'");
    expect_error([] { register_precision({.name = "no-factory"}); }, "has no factory");
  }
  EXPECT_EQ(find_precision("test-stateful"), nullptr);
  EXPECT_EQ(supported_precisions().size(), 14u);
  expect_error([] { unregister_precision("test-stateful"); }, "no precision named");
}

TrainerOptions stateful_options(int64_t max_steps) {
  TrainerOptions o = quiet_options("test-stateful");
  o.seed = 5;
  o.max_steps = max_steps;
  o.max_epochs = max_steps == 0 ? 0 : -1;  // 0: set up (module, optimizer) without training
  return o;
}

StatefulPrecision& stateful(Trainer& t) {
  auto* p = dynamic_cast<StatefulPrecision*>(&t.precision_plugin());
  EXPECT_NE(p, nullptr);
  return *p;
}

TEST(PrecisionRegistry, ConvertModuleRunsOnceAtTrainerSetup) {
  ScopedStatefulPrecision scoped;
  Trainer trainer(stateful_options(2));
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  trainer.fit(module, loader);
  // The whole TrainModule, after configure_model built its layers: root, net, 3 layers.
  EXPECT_EQ(stateful(trainer).converted, (std::vector<std::string>{"TinyModule"}));
  EXPECT_EQ(stateful(trainer).modules_seen, 5);
  EXPECT_EQ(stateful(trainer).steps, 2);
}

TEST(PrecisionRegistry, CheckpointsCarryEveryPluginsState) {
  ScopedStatefulPrecision scoped;
  Trainer a(stateful_options(3));
  TinyModule ma;
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  a.fit(ma, loader);
  ASSERT_EQ(stateful(a).losses.size(), 3u);
  const CheckpointContents c = collect_checkpoint(a);
  const auto meta = nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
  EXPECT_EQ(meta["precision"], "test-stateful");
  EXPECT_EQ(meta["precision_plugin"]["StatefulPrecision"]["steps"], 3);

  TrainerOptions fresh = stateful_options(0);
  Trainer b(fresh);
  TinyModule mb;
  b.fit(mb, loader);
  restore_checkpoint(b, c, "stateful.safetensors");
  EXPECT_EQ(stateful(b).steps, 3);
  EXPECT_EQ(stateful(b).losses, stateful(a).losses);

  // A run in another precision cannot take the plugin's state: a clear error, nothing changed.
  Trainer other(quiet_options("32-true"));
  TinyModule mo;
  other.fit(mo, loader);
  const auto before = testing::flat_params(mo);
  expect_error([&] { restore_checkpoint(other, c, "stateful.safetensors"); },
               {"stateful.safetensors",
                "the checkpoint was saved in precision 'test-stateful' and this run's is "
                "'32-true': the checkpoint holds StatefulPrecision state",
                "Resume with precision 'test-stateful' (CLI: --precision test-stateful)"});
  EXPECT_EQ(testing::flat_params(mo), before);

  // State the plugin rejects rolls the whole restore back.
  CheckpointContents broken = c;
  auto m = meta;
  m["precision_plugin"]["StatefulPrecision"] = {{"tag", "no counters"}};
  broken.metadata[kCheckpointMetadataKey] = m.dump();
  Trainer d(stateful_options(0));
  TinyModule md;
  d.fit(md, loader);
  const auto d_before = testing::flat_params(md);
  expect_error([&] { restore_checkpoint(d, broken, "broken.safetensors"); },
               {"broken.safetensors", "lacks 'steps'"});
  EXPECT_EQ(testing::flat_params(md), d_before);
  EXPECT_EQ(stateful(d).steps, 0);
}

// A quantized run resumed with other ignore_modules (the layers kept in full precision) cannot
// take the checkpoint's quantized layers: the error says so first, naming the layers and both
// lists (it listed the 4-bit state tensors as "unexpected" and named the cause last).
TEST(PrecisionRegistry, ResumeWithOtherIgnoreModulesNamesTheQuantizedLayers) {
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  for (const char* precision : {"nf4", "int8"}) {
    SCOPED_TRACE(precision);
    TrainerOptions saved = quiet_options(precision);
    saved.precision_options["ignore_modules"] = "net.2";
    Trainer a(saved);
    TinyModule ma;
    a.fit(ma, loader);
    const CheckpointContents c = collect_checkpoint(a);

    Trainer b(quiet_options(precision));
    TinyModule mb;
    b.fit(mb, loader);
    const auto before = testing::flat_params(mb);
    expect_error([&] { restore_checkpoint(b, c, "q.safetensors"); },
                 {"q.safetensors: the set of quantized layers differs from the checkpoint's: "
                  "quantized here but not in the checkpoint: net.2. It was written with "
                  "ignore_modules [\"net.2\"] (--quant-ignore net.2) and this run has [] "
                  "(--quant-ignore \"\"): --quant-ignore must match the run that wrote the "
                  "checkpoint; resume with --quant-ignore net.2"});
    EXPECT_EQ(testing::flat_params(mb), before);

    // The other way round: the checkpoint's quantized layer is kept here.
    TrainerOptions kept = quiet_options(precision);
    // One layer kept: keeping every Linear quantizes nothing and is an error of its own.
    kept.precision_options["ignore_modules"] = "net.0";
    const CheckpointContents all_quantized = [&] {
      Trainer t(quiet_options(precision));
      TinyModule m;
      t.fit(m, loader);
      return collect_checkpoint(t);
    }();
    Trainer k(kept);
    TinyModule mk;
    k.fit(mk, loader);
    expect_error([&] { restore_checkpoint(k, all_quantized, "q.safetensors"); },
                 {"quantized in the checkpoint but kept in full precision here: net.0.",
                  "resume with --quant-ignore \"\""});
  }
  // int8-training's layers keep float weights: the lists alone tell, and are compared.
  TrainerOptions saved = quiet_options("int8-training");
  saved.precision_options["ignore_modules"] = "net.2";
  Trainer a(saved);
  TinyModule ma;
  a.fit(ma, loader);
  Trainer b(quiet_options("int8-training"));
  TinyModule mb;
  b.fit(mb, loader);
  expect_error([&] { restore_checkpoint(b, collect_checkpoint(a), "q.safetensors"); },
               {"q.safetensors: this run's ignore_modules differ from the checkpoint's",
                "resume with --quant-ignore net.2"});
}

// A 4-bit layer's quant state is its JSON text as bytes, as long as nested_offset prints (0.05
// or 0.048766963...): a checkpoint whose text is longer or shorter than the live layer's (a run
// started from other base weights) resumed only when the lengths happened to agree.
TEST(PrecisionRegistry, ResumeTakesAQuantStateTextOfAnotherLength) {
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  Trainer a(quiet_options("nf4-dq"));
  TinyModule ma;
  a.fit(ma, loader);
  CheckpointContents c = collect_checkpoint(a);
  int rewritten = 0;
  for (auto& [name, t] : c.tensors) {
    if (name.find(".quant_state.bitsandbytes__nf4") == std::string::npos) continue;
    // The same JSON, indented: other bytes, another length, the same settings.
    const Tensor bytes = t.contiguous();
    const std::string text(static_cast<const char*>(bytes.data_ptr()),
                           static_cast<size_t>(bytes.numel()));
    const std::string longer = nlohmann::json::parse(text).dump(2);
    ASSERT_NE(longer.size(), text.size());
    Tensor u = empty({static_cast<int64_t>(longer.size())}, kUInt8);
    std::copy(longer.begin(), longer.end(), static_cast<char*>(u.data_ptr()));
    t = u;
    ++rewritten;
  }
  ASSERT_GT(rewritten, 0);

  Trainer b(quiet_options("nf4-dq"));
  TinyModule mb;
  b.fit(mb, loader);
  restore_checkpoint(b, c, "nf4-dq.safetensors");
  // Every tensor but the rewritten texts is the saved run's, bit for bit.
  const nn::StateDict restored = mb.state_dict();
  for (const auto& [name, t] : ma.state_dict()) {
    if (name.find(".quant_state.") != std::string::npos) continue;
    const Tensor& r = restored.at(name);
    ASSERT_EQ(r.shape(), t.shape()) << name;
    const Tensor x = t.contiguous(), y = r.contiguous();
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << name;
  }
}

}  // namespace
}  // namespace mantissa::train
