// Checkpoint metadata is untrusted input. A real checkpoint from a short 16-mixed run (AdamW,
// a StepLR, a GradScaler) is mutated one trainer field at a time to wrong types and
// out-of-range values; every load must throw a mantissa::Error that names the field and
// leave the run untouched. The unmutated checkpoint must still load.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/test_util.h"
#include "tiny_module.h"
#include "train/checkpoint/checkpoint_fields.h"

namespace mantissa::train {
namespace {

using testing::flat_params;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;
using json = nlohmann::json;

TinyOptions adamw_with_scheduler() {
  TinyOptions t;
  t.adamw = true;
  t.lr = 0.01;
  t.schedulers = [](optim::Optimizer& opt) {
    return std::vector<LRSchedulerConfig>{
        {std::make_shared<optim::StepLR>(opt, 2, 0.5), "step", 1}};
  };
  return t;
}

struct TrainedRun {
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<TinyModule> module;
};

TrainedRun make_run(int64_t steps, uint64_t seed) {
  TrainerOptions o = quiet_options("16-mixed");
  o.seed = seed;
  o.max_steps = steps;
  o.max_epochs = steps > 0 ? -1 : 0;
  TrainedRun r{std::make_unique<Trainer>(o), std::make_unique<TinyModule>(adamw_with_scheduler())};
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 3);
  r.trainer->fit(*r.module, loader);
  return r;
}

// One mutation: a JSON pointer into the trainer metadata, the value put there (or removed),
// and the field name the error must quote.
struct Mutation {
  std::string pointer;
  json value;  // discarded: remove the field
  std::string field;
};

std::vector<Mutation> mutations() {
  const json remove(json::value_t::discarded);
  const json huge = int64_t{1} << 60;
  std::vector<Mutation> m;
  // The position: non-negative integers, not floats, bools, strings or nulls.
  for (const char* key : {"epoch", "global_step", "batches_in_epoch", "loggers_step"}) {
    const std::string name = std::string("'") + key + "'";
    for (const json& bad : {json(-1), json("3"), json(1.5), json(true), json(nullptr), huge,
                            json::array(), json(18446744073709551615ull)})
      m.push_back({std::string("/") + key, bad, name});
  }
  for (const char* key : {"epoch", "global_step", "batches_in_epoch"})
    m.push_back({std::string("/") + key, remove, std::string("'") + key + "'"});
  // More batches trained in the epoch than the file's own epochs have.
  m.push_back({"/batches_in_epoch", json(int64_t{1000000000000}), "the file is damaged"});
  // A position whose fields do not add up (3 steps after 3 of 4 batches of the first epoch).
  m.push_back({"/batches_in_epoch", json(0), "global_step is 3"});
  m.push_back({"/batches_in_epoch", json(4), "global_step is 3"});
  m.push_back({"/epoch", json(1), "global_step is 3"});
  m.push_back({"/global_step", json(4), "global_step 4"});  // the step losses hold 3
  for (const json& bad : {json(0), json("2"), json(-1)})
    m.push_back({"/accumulate_grad_batches", bad, "'accumulate_grad_batches'"});
  m.push_back({"/accumulate_grad_batches", json(2), "global_step is 3"});
  m.push_back({"/steps_before_epoch", json(1), "steps_before_epoch 1"});
  for (const json& bad : {json("1"), json(1.0), json(-1), json(2), json(nullptr), remove})
    m.push_back({"/version", bad, "version"});
  for (const json& bad : {json("checkpoint"), json(1), remove})
    m.push_back({"/format", bad, "'format'"});
  for (const json& bad : {json(16), json("fp7"), json("\x1b[31m"), json(nullptr), remove})
    m.push_back({"/precision", bad, "precision"});
  for (const json& bad : {json(5), json("not a generator"), remove})
    m.push_back({"/rng", bad, "'rng'"});
  for (const json& bad : {json::object(), json::array(), json::array({5}), remove})
    m.push_back({"/optimizers", bad, "optimizer"});
  for (const json& bad : {json(5), remove})
    m.push_back({"/optimizers/0/optimizer", bad, "'optimizers[0].optimizer'"});
  m.push_back({"/optimizers/0/optimizer", json("SGD"), "holds SGD state for optimizer 0"});
  for (const json& bad : {json(5), json::object(), remove})
    m.push_back({"/lr_schedulers", bad, "lr_schedulers"});
  m.push_back({"/lr_schedulers/0", json(5), "'lr_schedulers[0]'"});
  m.push_back({"/lr_schedulers/0/name", json(5), "'lr_schedulers[0].name'"});
  for (const json& bad : {json(-2), json("1"), json(0.5)})
    m.push_back({"/lr_schedulers/0/last_epoch", bad, "'lr_schedulers[0].last_epoch'"});
  m.push_back({"/lr_schedulers/0/base_lrs/0", json(-0.1), "'lr_schedulers[0].base_lrs[0]'"});
  m.push_back({"/lr_schedulers/0/base_lrs/0", json("x"), "'lr_schedulers[0].base_lrs[0]'"});
  m.push_back({"/lr_schedulers/0/_last_lr", json(1), "'lr_schedulers[0]._last_lr'"});
  for (const json& bad : {json::array(), json(1), remove})
    m.push_back({"/callbacks", bad, "'callbacks'"});
  m.push_back({"/callbacks/Foo", json(3), "'callbacks.Foo'"});
  for (const json& bad : {json::array(), json("x"), remove})
    m.push_back({"/precision_plugin", bad, "'precision_plugin'"});
  m.push_back({"/precision_plugin/MixedPrecision", json(1), "'precision_plugin.MixedPrecision'"});
  // The GradScaler's own fields, checked by GradScaler::load_state_dict.
  const std::string scaler = "/precision_plugin/MixedPrecision/";
  for (const json& bad : {json(-1.0), json(0), json("big")})
    m.push_back({scaler + "scale", bad, "'scale'"});
  for (const json& bad : {json(0.5), json(1)})
    m.push_back({scaler + "growth_factor", bad, "'growth_factor'"});
  for (const json& bad : {json(2.0), json(0), json(-0.5)})
    m.push_back({scaler + "backoff_factor", bad, "'backoff_factor'"});
  // growth_interval <= 0 (never grow) and a tracker past the interval are states a scaler
  // writes itself (GradScaler.StateDictOfANeverGrowingScalerLoadsBack); the int32 tracker's
  // range is checked.
  for (const json& bad : {json(2.5), json("x")})
    m.push_back({scaler + "growth_interval", bad, "'growth_interval'"});
  for (const json& bad : {json(-1), json(int64_t{3000000000}), json(0.5)})
    m.push_back({scaler + "_growth_tracker", bad, "'_growth_tracker'"});
  for (const json& bad : {json::array(), json(3)})
    m.push_back({"/callback_metrics", bad, "'callback_metrics'"});
  m.push_back({"/callback_metrics/train_loss", json("low"), "'callback_metrics.train_loss'"});
  m.push_back({"/callback_metrics/train_loss", json::array(), "'callback_metrics.train_loss'"});
  m.push_back({"/callback_metrics/\x1b[31m", json(1.0), "'callback_metrics'"});
  m.push_back({"/callback_metrics/", json(1.0), "'callback_metrics'"});
  return m;
}

bool has_control_bytes(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

TEST(CheckpointFields, EveryMutatedTrainerFieldIsRefusedByName) {
  TrainedRun saved = make_run(3, 21);
  const CheckpointContents good = collect_checkpoint(*saved.trainer);
  const json meta = json::parse(good.metadata.at(kCheckpointMetadataKey));
  ASSERT_TRUE(meta.at("precision_plugin").contains("MixedPrecision")) << meta.dump();

  TrainedRun target = make_run(0, 99);
  const std::vector<float> params = flat_params(*target.module);
  const json opt_meta = target.trainer->optimizer()->state_dict().meta;
  const json scaler_state = target.trainer->precision_plugin().scaler()->state_dict();
  const std::string rng = default_generator().state();

  int refused = 0;
  for (const Mutation& m : mutations()) {
    json mutated = meta;
    const json::json_pointer ptr(m.pointer);
    if (m.value.is_discarded()) {
      mutated[ptr.parent_pointer()].erase(ptr.back());
    } else {
      mutated[ptr] = m.value;
    }
    ASSERT_NE(mutated.dump(), meta.dump()) << m.pointer;  // 1.0 == 1 as JSON values
    CheckpointContents c = good;
    c.metadata[kCheckpointMetadataKey] = mutated.dump();
    const std::string what = m.pointer + " = " + m.value.dump();
    try {
      restore_checkpoint(*target.trainer, c, "fuzz.safetensors");
      ADD_FAILURE() << what << ": loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      ++refused;
      EXPECT_NE(msg.find(m.field), std::string::npos) << what << ": " << msg;
      EXPECT_NE(msg.find("fuzz.safetensors"), std::string::npos) << what << ": " << msg;
      EXPECT_FALSE(has_control_bytes(msg)) << what << ": " << msg;
    }
    // Nothing was applied.
    EXPECT_EQ(flat_params(*target.module), params) << what;
    EXPECT_EQ(target.trainer->optimizer()->state_dict().meta, opt_meta) << what;
    EXPECT_EQ(target.trainer->precision_plugin().scaler()->state_dict(), scaler_state) << what;
    EXPECT_EQ(target.trainer->global_step(), 0) << what;
    EXPECT_EQ(target.trainer->current_epoch(), 0) << what;
    EXPECT_EQ(default_generator().state(), rng) << what;
  }
  EXPECT_EQ(refused, static_cast<int>(mutations().size()));
  EXPECT_GE(refused, 90);

  // The real checkpoint loads, every field intact.
  restore_checkpoint(*target.trainer, good, "good.safetensors");
  EXPECT_EQ(target.trainer->global_step(), 3);
  EXPECT_EQ(flat_params(*target.module), flat_params(*saved.module));
}

TEST(CheckpointFields, MetricsMayHoldNaNAsNull) {
  // nlohmann writes a NaN metric as null: such a checkpoint must still load.
  TrainedRun saved = make_run(2, 5);
  CheckpointContents c = collect_checkpoint(*saved.trainer);
  json meta = json::parse(c.metadata.at(kCheckpointMetadataKey));
  meta["callback_metrics"]["val_loss"] = std::nan("");
  ASSERT_TRUE(meta["callback_metrics"]["val_loss"].is_number_float());
  c.metadata[kCheckpointMetadataKey] = meta.dump();
  ASSERT_NE(c.metadata[kCheckpointMetadataKey].find("\"val_loss\":null"), std::string::npos);
  TrainedRun target = make_run(0, 6);
  restore_checkpoint(*target.trainer, c, "nan.safetensors");
  EXPECT_TRUE(std::isnan(target.trainer->callback_metrics().at("val_loss")));
}

// nlohmann::json keeps the last of two equal keys: a second "global_step" in the metadata won
// without a word.
TEST(CheckpointFields, ARepeatedKeyInTheMetadataIsDamage) {
  TrainedRun saved = make_run(2, 5);
  TrainedRun target = make_run(0, 6);
  CheckpointContents c = collect_checkpoint(*saved.trainer);
  std::string& text = c.metadata[kCheckpointMetadataKey];
  ASSERT_EQ(text.front(), '{');
  text.insert(1, R"("global_step":0,)");
  mantissa::testing::expect_error(
      [&] { restore_checkpoint(*target.trainer, c, "dup.safetensors"); },
      {"dup.safetensors: the 'mantissa.trainer' metadata: key 'global_step' appears twice in the "
       "top level",
       "the file is damaged"});
  EXPECT_EQ(target.trainer->global_step(), 0);
}

TEST(CheckpointFields, DeepMetadataAndEscapesInTensorNames) {
  TrainedRun saved = make_run(2, 5);
  TrainedRun target = make_run(0, 6);
  CheckpointContents deep = collect_checkpoint(*saved.trainer);
  deep.metadata[kCheckpointMetadataKey] =
      R"({"callbacks":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::string msg =
      mantissa::testing::error_of([&] { restore_checkpoint(*target.trainer, deep, "d"); });
  EXPECT_NE(msg.find("more than 64 levels deep"), std::string::npos) << msg.substr(0, 300);

  CheckpointContents named = collect_checkpoint(*saved.trainer);
  named.tensors.emplace_back("\x1b[31mextra", zeros({1}));
  const std::string esc =
      mantissa::testing::error_of([&] { restore_checkpoint(*target.trainer, named, "e"); });
  EXPECT_NE(esc.find(R"(unexpected tensor '\x1b[31mextra')"), std::string::npos) << esc;
  EXPECT_FALSE(has_control_bytes(esc)) << esc;

  CheckpointContents stray = collect_checkpoint(*saved.trainer);
  for (int i = 0; i < 1000; ++i)
    stray.tensors.emplace_back("model.x" + std::to_string(i), zeros({1}));
  const std::string many =
      mantissa::testing::error_of([&] { restore_checkpoint(*target.trainer, stray, "s"); });
  EXPECT_NE(many.find("(1000 in all)"), std::string::npos) << many.substr(0, 500);
  EXPECT_LT(many.size(), 1000u);
}

TEST(CheckpointFields, TypedGettersNameTheField) {
  const json j = {{"n", 5}, {"f", 2.5}, {"s", "x"}, {"o", {{"k", -1}}}, {"a", {1, 2}}};
  const CheckpointFields f(j, "src");
  EXPECT_EQ(f.require_int("n", 0, 10), 5);
  EXPECT_EQ(f.require_number("f", 0, 3), 2.5);
  EXPECT_EQ(f.require_number("n", 0, 10), 5.0);
  EXPECT_EQ(f.require_string("s"), "x");
  EXPECT_EQ(f.require_array("a").size(), 2u);
  EXPECT_EQ(f.nested("o").require_int("k", -1, 0), -1);
  const std::string range = mantissa::testing::error_of([&] { f.require_int("n", 0, 4); });
  EXPECT_NE(
      range.find("[checkpoint] src: checkpoint field 'n' must be an integer in [0, 4], got 5"),
      std::string::npos)
      << range;
  const std::string type =
      mantissa::testing::error_of([&] { f.require_int("s", 0, kMaxCheckpointCount); });
  EXPECT_NE(type.find("checkpoint field 's' must be a non-negative integer, got \"x\""),
            std::string::npos)
      << type;
  const std::string nested =
      mantissa::testing::error_of([&] { f.nested("o").require_int("k", 0, 1); });
  EXPECT_NE(nested.find("'o.k'"), std::string::npos) << nested;
  EXPECT_NE(mantissa::testing::error_of([&] { f.require_int("f", 0, 10); }).find("got 2.5"),
            std::string::npos);
  EXPECT_NE(mantissa::testing::error_of([&] { f.require("missing"); }).find("'missing' is missing"),
            std::string::npos);
}

// A count past 2^53 (what restore reads global_step, epoch and batches with) says it is too
// large and gives the limit: "must be a non-negative integer, got 4611686018427387904" named
// no limit and read as a contradiction.
TEST(CheckpointFields, CountAboveTheLimitSaysTooLargeAndGivesTheLimit) {
  const json j = {{"global_step", int64_t{1} << 62},
                  {"epoch", json(18446744073709551615ull)},
                  {"batches_in_epoch", kMaxCheckpointCount}};
  const CheckpointFields f(j, "last.safetensors");
  EXPECT_EQ(f.require_int("batches_in_epoch", 0, kMaxCheckpointCount), kMaxCheckpointCount);
  const std::string step =
      mantissa::testing::error_of([&] { f.require_int("global_step", 0, kMaxCheckpointCount); });
  EXPECT_NE(step.find("[checkpoint] last.safetensors: checkpoint field 'global_step' is too "
                      "large: it must be at most 9007199254740992 (2^53, the largest count a "
                      "checkpoint holds"),
            std::string::npos)
      << step;
  EXPECT_NE(step.find("got 4611686018427387904"), std::string::npos) << step;
  EXPECT_EQ(step.find("non-negative"), std::string::npos) << step;
  const std::string epoch =
      mantissa::testing::error_of([&] { f.require_int("epoch", 0, kMaxCheckpointCount); });
  EXPECT_NE(epoch.find("'epoch' is too large: it must be at most 9007199254740992"),
            std::string::npos)
      << epoch;
  EXPECT_NE(epoch.find("got 18446744073709551615"), std::string::npos) << epoch;
}

}  // namespace
}  // namespace mantissa::train
