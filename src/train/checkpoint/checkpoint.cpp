// Collecting and restoring a trainer's state. Restoring is validate-then-commit: everything in
// the file is checked against the live module, optimizer and schedulers first; the commit then
// applies it, and should any part still fail, the snapshot taken before puts everything back.
#include "mantissa/train/checkpoint/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/fp8/state_check.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/quant/bnb_format.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "mantissa/train/trainer.h"
#include "train/checkpoint/checkpoint_checksums.h"
#include "train/checkpoint/checkpoint_fields.h"
#include "train/checkpoint/optimizer_state_dtypes.h"
#include "train/checkpoint/resume_plan.h"
#include "train/parameter_range.h"

namespace mantissa::train {

// The Trainer's private counters, for checkpoints only.
struct CheckpointAccess {
  static void set_position(Trainer& t, int64_t epoch, int64_t global_step, int64_t batches) {
    t.epoch_ = epoch;
    t.global_step_ = global_step;
    t.batches_in_epoch_ = batches;
  }
  static std::map<std::string, double>& metrics(Trainer& t) { return t.callback_metrics_; }
  static std::vector<double>& step_losses(Trainer& t) { return t.step_losses_; }
  static bool& validation_due(Trainer& t) { return t.validation_due_; }
  static int64_t& logger_step(Trainer& t) { return t.logger_step_; }
  using EpochSum = Trainer::EpochSum;
  using EpochSums = std::map<std::string, EpochSum>;
  static EpochSums& epoch_sums(Trainer& t) { return t.epoch_sums_; }
  // The on_epoch sums a checkpoint carries: those of an epoch in progress (also after its
  // last batch, before its end), none once it is ending (its means are out).
  static const EpochSums* epoch_sums_in_progress(const Trainer& t) {
    if (t.in_train_epoch_end_ || t.batches_in_epoch_ == 0) return nullptr;
    return &t.epoch_sums_;
  }
  // Written after an epoch's last batch, before that epoch's end (its validation, hooks,
  // means): a resume must run them.
  static bool written_before_epoch_end(const Trainer& t) {
    return t.batches_in_epoch_ > 0 && t.batches_in_epoch_ >= t.num_training_batches_ &&
           !t.in_train_epoch_end_;
  }
  static bool& epoch_end_due(Trainer& t) { return t.epoch_end_due_; }
  static int64_t accumulated_batches(const Trainer& t) { return t.accumulated_batches(); }
  // The cut-short epoch a checkpoint taken now resumes in (none once training went on).
  static const auto* cut_epoch(const Trainer& t) {
    return t.cut_epoch_ && t.cut_epoch_->global_step == t.global_step_ ? &*t.cut_epoch_ : nullptr;
  }
};

namespace {

constexpr const char* kWhere = "checkpoint";
const std::string kModelPrefix = "model.";
// Optimizer i's state tensors are "optimizer.<i>.<key>".
const std::string kOptimizerPrefix = "optimizer.";
// The run's history: the loss of every optimizer step so far (float64, one per step).
const std::string kStepLossesTensor = "trainer.step_losses";

// The dtype parameters have under a precision (of a checkpoint's metadata).
DType param_dtype_of(const std::string& precision, const std::string& source) {
  const PrecisionEntry* entry = find_precision(precision);
  if (entry == nullptr || !entry->implemented || entry->name != precision) {
    fail(kWhere, "{}: unknown precision {} in the metadata (this build knows: {})", source,
         quote_untrusted(precision), fmt::join(supported_precisions(), ", "));
  }
  return precision_param_dtype(precision);
}

// Up to 10 names for a message (a hostile file may hold thousands), then how many in all.
std::string first_names(const std::vector<std::string>& names) {
  return mantissa::first_names(names, 10);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

struct Snapshot {
  nn::StateDict model;
  std::vector<optim::OptimizerState> optimizers;
  nlohmann::json plugin;
  std::vector<nlohmann::json> schedulers;
  std::vector<nlohmann::json> callbacks;
  std::string rng;
  int64_t epoch, global_step, batches;
  std::map<std::string, double> metrics;
  std::vector<double> step_losses;
  bool validation_due = false;
  bool epoch_end_due = false;
  int64_t logger_step = 0;
  CheckpointAccess::EpochSums epoch_sums;
};

Snapshot take_snapshot(Trainer& t) {
  Snapshot s;
  for (const auto& [k, v] : t.module()->state_dict()) s.model.insert(k, v.clone());
  for (const auto& o : t.optimizers()) {
    s.optimizers.push_back(o->state_dict());
    for (auto& [k, v] : s.optimizers.back().tensors) v = v.clone();
  }
  s.plugin = t.precision_plugin().state_dict();
  for (const auto& c : t.lr_schedulers()) s.schedulers.push_back(c.scheduler->state_dict());
  for (const auto& c : t.callbacks()) s.callbacks.push_back(c->state_dict());
  s.rng = default_generator().state();
  s.epoch = t.current_epoch();
  s.global_step = t.global_step();
  s.batches = t.batches_in_epoch();
  s.metrics = t.callback_metrics();
  s.step_losses = t.step_losses();
  s.validation_due = t.validation_due();
  s.epoch_end_due = CheckpointAccess::epoch_end_due(t);
  s.logger_step = t.logger_step();
  s.epoch_sums = CheckpointAccess::epoch_sums(t);
  return s;
}

void apply_snapshot(Trainer& t, const Snapshot& s) {
  t.module()->load_state_dict(s.model);
  for (size_t i = 0; i < s.optimizers.size(); ++i)
    t.optimizers()[i]->load_state_dict(s.optimizers[i]);
  if (!s.plugin.empty()) t.precision_plugin().load_state_dict(s.plugin);
  for (size_t i = 0; i < s.schedulers.size(); ++i) {
    t.lr_schedulers()[i].scheduler->load_state_dict(s.schedulers[i]);
  }
  for (size_t i = 0; i < s.callbacks.size(); ++i) t.callbacks()[i]->load_state_dict(s.callbacks[i]);
  default_generator().set_state(s.rng);
  CheckpointAccess::set_position(t, s.epoch, s.global_step, s.batches);
  CheckpointAccess::metrics(t) = s.metrics;
  CheckpointAccess::step_losses(t) = s.step_losses;
  CheckpointAccess::validation_due(t) = s.validation_due;
  CheckpointAccess::epoch_end_due(t) = s.epoch_end_due;
  CheckpointAccess::logger_step(t) = s.logger_step;
  CheckpointAccess::epoch_sums(t) = s.epoch_sums;
}

// JSON has no NaN or inf: a non-finite number is written as the string "nan", "inf" or "-inf".
nlohmann::json number_to_json(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

nlohmann::json epoch_sums_to_json(const CheckpointAccess::EpochSums& sums) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : sums)
    j[name] = {{"sum", number_to_json(s.sum)}, {"count", s.count}, {"forked", s.forked}};
  return j;
}

// "epoch_sums" as epoch_sums_to_json wrote it; every field checked (the file is untrusted).
CheckpointAccess::EpochSums read_epoch_sums(const CheckpointFields& meta) {
  const CheckpointFields all = meta.nested("epoch_sums");
  CheckpointAccess::EpochSums out;
  for (const auto& [name, value] : meta.require_object("epoch_sums").items()) {
    meta.check_metric_name("epoch_sums", name);  // printed later, as callback_metrics' names
    const CheckpointFields f = all.nested(name);
    CheckpointAccess::EpochSum s;
    const nlohmann::json& sum = f.require("sum");
    if (sum.is_string() && (sum == "nan" || sum == "inf" || sum == "-inf")) {
      s.sum = sum == "nan" ? NAN : (sum == "inf" ? INFINITY : -INFINITY);
    } else {
      s.sum = f.require_number("sum", -std::numeric_limits<double>::max(),
                               std::numeric_limits<double>::max());
    }
    s.count = f.require_int("count", 1, kMaxCheckpointCount);
    s.forked = f.require_bool("forked");
    out[name] = s;
  }
  return out;
}

}  // namespace

CheckpointContents collect_checkpoint(Trainer& trainer,
                                      const std::vector<optim::OptimizerState>& optimizer_states) {
  MANTISSA_CHECK(trainer.module() != nullptr && trainer.optimizer() != nullptr, kWhere,
                 "the trainer has no module and optimizer to save (call fit first)");
  CheckpointContents out;
  for (const auto& [name, t] : trainer.module()->state_dict()) {
    out.tensors.emplace_back(kModelPrefix + name, t.clone());
  }
  nlohmann::json optimizer_metas = nlohmann::json::array();
  for (size_t i = 0; i < trainer.optimizers().size(); ++i) {
    const optim::OptimizerState opt =
        i < optimizer_states.size() ? optimizer_states[i] : trainer.optimizers()[i]->state_dict();
    for (const auto& [key, t] : opt.tensors)
      out.tensors.emplace_back(fmt::format("{}{}.{}", kOptimizerPrefix, i, key), t.clone());
    optimizer_metas.push_back(opt.meta);
  }
  // A run resumed from a checkpoint without history has fewer losses than steps: not saved.
  if (!trainer.step_losses().empty() &&
      static_cast<int64_t>(trainer.step_losses().size()) == trainer.global_step()) {
    const auto& losses = trainer.step_losses();
    out.tensors.emplace_back(kStepLossesTensor,
                             tensor_of(losses, {static_cast<int64_t>(losses.size())}, kFloat64));
  }

  nlohmann::json j;
  j["format"] = "mantissa-checkpoint";
  j["version"] = kCheckpointFormatVersion;
  // After fit() stopped inside an epoch (max_steps, should_stop) the counters have moved on to
  // the next epoch; the checkpoint records the batch to resume at, so the resumed run trains
  // the rest of it.
  const auto* cut = CheckpointAccess::cut_epoch(trainer);
  const int64_t epoch = cut ? cut->epoch : trainer.current_epoch();
  const int64_t batches = cut ? cut->batches : trainer.batches_in_epoch();
  j["epoch"] = epoch;
  j["global_step"] = trainer.global_step();
  j["batches_in_epoch"] = batches;
  // How the steps were counted, so that a resume can check the position's fields against each
  // other (resume_plan.cpp): the accumulation, and the steps before this epoch where they are
  // not `epoch` epochs of this run's length (a resume changed the batches per epoch).
  if (trainer.module()->automatic_optimization) {
    const int64_t accumulate = trainer.options().accumulate_grad_batches;
    const int64_t n = trainer.run_config().num_training_batches;  // as "run" records it
    j["accumulate_grad_batches"] = accumulate;
    const int64_t before = trainer.global_step() - optimizer_steps_after(batches, n, accumulate);
    if (before != epoch * optimizer_steps_per_epoch(n, accumulate))
      j["steps_before_epoch"] = before;
  }
  if (trainer.validation_due()) j["validation_due"] = true;
  if (CheckpointAccess::written_before_epoch_end(trainer)) j["epoch_end_due"] = true;
  // Written inside a gradient-accumulation window: its gradients are not here, so a resume is
  // refused (resume_plan.cpp) instead of continuing a window that lost batches.
  if (const int64_t open = CheckpointAccess::accumulated_batches(trainer); open > 0)
    j["accumulated_batches"] = open;
  // The epoch's on_epoch sums so far, so a run resumed mid-epoch reports the whole epoch's means.
  if (const auto* sums = CheckpointAccess::epoch_sums_in_progress(trainer); sums && !sums->empty())
    j["epoch_sums"] = epoch_sums_to_json(*sums);
  j["precision"] = trainer.precision_plugin().precision();
  j["optimizers"] = optimizer_metas;
  j["precision_plugin"] = nlohmann::json::object();
  const nlohmann::json plugin_state = trainer.precision_plugin().state_dict();
  if (!plugin_state.empty()) {
    j["precision_plugin"][trainer.precision_plugin().class_name()] = plugin_state;
  }
  j["lr_schedulers"] = nlohmann::json::array();
  for (const auto& c : trainer.lr_schedulers()) {
    j["lr_schedulers"].push_back(c.scheduler->state_dict());
  }
  j["callbacks"] = nlohmann::json::object();
  for (const auto& c : trainer.callbacks()) j["callbacks"][c->state_key()] = c->state_dict();
  j["rng"] = default_generator().state();
  // The loggers' step (Trainer::logger_step): a validation still due on resume is logged at
  // the step the unbroken run logged it.
  j["loggers_step"] = trainer.logger_step();
  j["callback_metrics"] = trainer.callback_metrics();
  j["run"] = run_config_to_json(trainer.run_config());
  nlohmann::json module_state = nlohmann::json::object();
  trainer.module()->on_save_checkpoint(module_state);
  j["module"] = module_state;
  if (!trainer.module()->hparams().empty()) j["hyper_parameters"] = trainer.module()->hparams();
  out.metadata[kCheckpointMetadataKey] = io::dump_json(j);
  return out;
}

namespace {

// A checkpoint's contents, parsed and checked against the trainer, ready to be applied.
struct ValidatedCheckpoint {
  int64_t epoch = 0, global_step = 0, batches = 0;
  std::optional<int64_t> loggers_step;  // absent in older checkpoints
  std::string precision;                // the precision it was saved in
  nn::StateDict model;
  std::vector<optim::OptimizerState> optimizers;
  nlohmann::json plugin_state;  // null: nothing for this run's plugin
  nlohmann::json schedulers;
  nlohmann::json callbacks;
  std::string rng;
  std::map<std::string, double> metrics;
  ResumePlan resume;                       // what this run changes, checked
  bool validation_due = false;             // saved between a batch and its validation
  bool epoch_end_due = false;              // saved after an epoch's last batch, before its end
  CheckpointAccess::EpochSums epoch_sums;  // of the epoch in progress
  std::optional<std::vector<double>> step_losses;  // absent in older checkpoints
  nlohmann::json module_state = nlohmann::json::object();
};

nlohmann::json parse_metadata(const CheckpointContents& contents, const std::string& source) {
  auto it = contents.metadata.find(kCheckpointMetadataKey);
  MANTISSA_CHECK(it != contents.metadata.end(), kWhere,
                 "{}: no '{}' entry in the file's __metadata__: not a mantissa checkpoint", source,
                 kCheckpointMetadataKey);
  io::check_json_nesting(it->second, kWhere,
                         fmt::format("{}: the '{}' metadata", source, kCheckpointMetadataKey));
  nlohmann::json meta;
  try {
    // A repeated key (two "global_step"s) is damage: which value counts is not defined.
    meta = io::parse_json_refusing_duplicate_keys(
        it->second, kWhere, fmt::format("{}: the '{}' metadata", source, kCheckpointMetadataKey));
  } catch (const nlohmann::json::exception& e) {
    fail(kWhere, "{}: the '{}' metadata is not valid JSON ({})", source, kCheckpointMetadataKey,
         escape_untrusted(e.what(), 200));
  }
  MANTISSA_CHECK(meta.is_object(), kWhere, "{}: the '{}' metadata is not a JSON object", source,
                 kCheckpointMetadataKey);
  const CheckpointFields fields(meta, source);
  if (fields.require_string("format") != "mantissa-checkpoint")
    fields.fail_field("format", "\"mantissa-checkpoint\"", meta["format"]);
  const int64_t version = fields.require_int("version", 1, kMaxCheckpointCount);
  MANTISSA_CHECK(version == kCheckpointFormatVersion, kWhere,
                 "{}: checkpoint format version {} is not supported (this build reads {})", source,
                 version, kCheckpointFormatVersion);
  return meta;
}

void read_position(const nlohmann::json& meta, const std::string& source,
                   ValidatedCheckpoint& out) {
  const CheckpointFields fields(meta, source);
  out.epoch = fields.require_int("epoch", 0, kMaxCheckpointCount);
  out.global_step = fields.require_int("global_step", 0, kMaxCheckpointCount);
  out.batches = fields.require_int("batches_in_epoch", 0, kMaxCheckpointCount);
  if (fields.has("loggers_step"))
    out.loggers_step = fields.require_int("loggers_step", 0, kMaxCheckpointCount);
}

// The optimizers' metadata, checked to belong to the trainer's optimizers (same number, same
// kinds, in order).
std::vector<optim::OptimizerState> read_optimizer_metas(
    const nlohmann::json& meta, const std::vector<std::shared_ptr<optim::Optimizer>>& live,
    const std::string& source) {
  const CheckpointFields fields(meta, source);
  const nlohmann::json& optimizers = fields.require_array("optimizers");
  MANTISSA_CHECK(optimizers.size() == live.size(), kWhere,
                 "{}: the checkpoint holds the state of {} optimizer(s), configure_optimizers() "
                 "returned {}",
                 source, optimizers.size(), live.size());
  std::vector<optim::OptimizerState> out(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    const std::string saved = fields.element("optimizers", i).require_string("optimizer");
    if (saved != live[i]->name()) {
      // The CLI's --optimizer values are the class names in lower case.
      std::string flag = saved;
      for (char& c : flag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool known = flag == "adamw" || flag == "adam" || flag == "sgd" ||
                         flag == "adamw8bit" || flag == "adam8bit";
      fail(kWhere,
           "{}: the checkpoint holds {} state for optimizer {}, but the module's optimizer is "
           "{}; resume with the optimizer the run was trained with{}",
           source, escape_untrusted(saved), i, live[i]->name(),
           known ? fmt::format(" (CLI: --optimizer {})", flag) : "");
    }
    out[i].meta = optimizers[i];
  }
  return out;
}

// "optimizer.<i>.<key>": the index (of one of `count` optimizers) and the key; nullopt when
// the name does not have that form.
std::optional<std::pair<size_t, std::string>> parse_optimizer_tensor(const std::string& name,
                                                                     size_t count) {
  const size_t dot = name.find('.', kOptimizerPrefix.size());
  if (dot == std::string::npos || dot == kOptimizerPrefix.size() || dot + 1 >= name.size())
    return std::nullopt;
  const std::string index = name.substr(kOptimizerPrefix.size(), dot - kOptimizerPrefix.size());
  if (index.size() > 6 || !std::all_of(index.begin(), index.end(), ::isdigit)) return std::nullopt;
  const size_t i = std::stoul(index);
  if (i >= count) return std::nullopt;
  return std::make_pair(i, name.substr(dot + 1));
}

nlohmann::json read_schedulers(const nlohmann::json& meta, Trainer& trainer,
                               const std::string& source) {
  const CheckpointFields fields(meta, source);
  const nlohmann::json& schedulers = fields.require_array("lr_schedulers");
  const auto& live = trainer.lr_schedulers();
  MANTISSA_CHECK(schedulers.size() == live.size(), kWhere,
                 "{}: the checkpoint has {} LR schedulers, configure_optimizers() {}", source,
                 schedulers.size(), live.size());
  for (size_t i = 0; i < schedulers.size(); ++i) {
    const CheckpointFields scheduler = fields.element("lr_schedulers", i);
    const std::string name = scheduler.require_string("name");
    MANTISSA_CHECK(name == live[i].scheduler->name(), kWhere,
                   "{}: LR scheduler {} is a {} in the checkpoint but a {} here", source, i,
                   escape_untrusted(name), live[i].scheduler->name());
    check_scheduler_fields(scheduler);
  }
  return schedulers;
}

std::string read_rng(const nlohmann::json& meta, const std::string& source) {
  const std::string rng = CheckpointFields(meta, source).require_string("rng");
  Generator probe;
  try {
    probe.set_state(rng);
  } catch (const Error&) {
    fail(kWhere, "{}: checkpoint field 'rng' holds a corrupt RNG state", source);
  }
  return rng;
}

// The step-loss history: float64, one value per optimizer step taken.
std::vector<double> read_step_losses(const Tensor& t, int64_t global_step,
                                     const std::string& source) {
  MANTISSA_CHECK(t.dtype() == kFloat64 && t.dim() == 1 && t.numel() == global_step, kWhere,
                 "{}: tensor '{}' must be float64 of shape [{}] (one loss per step, global_step "
                 "{}), got {} of shape [{}]",
                 source, kStepLossesTensor, global_step, global_step, t.dtype().name(),
                 fmt::join(t.shape(), "x"));
  std::vector<double> losses = t.contiguous().to_vector<double>();
  // NaN stands for a step whose training_step returned no loss, and a custom module's loss may
  // be negative; an infinite loss stops the run as diverged, so no run writes one.
  for (size_t i = 0; i < losses.size(); ++i) {
    MANTISSA_CHECK(!std::isinf(losses[i]), kWhere,
                   "{}: tensor '{}' holds {} for optimizer step {}, but a run stops at a loss "
                   "that is not finite, so no run writes one: the file is damaged",
                   source, kStepLossesTensor, losses[i], i + 1);
  }
  return losses;
}

// Sorts the file's tensors into the model's state dict and the optimizer's state tensors.
void split_tensors(const CheckpointContents& contents, const std::string& source,
                   ValidatedCheckpoint& out) {
  for (const auto& [name, t] : contents.tensors) {
    if (starts_with(name, kModelPrefix)) {
      out.model.insert(name.substr(kModelPrefix.size()), t);
    } else if (auto opt = starts_with(name, kOptimizerPrefix)
                              ? parse_optimizer_tensor(name, out.optimizers.size())
                              : std::nullopt) {
      out.optimizers[opt->first].tensors[opt->second] = t;
    } else if (name == kStepLossesTensor) {
      out.step_losses = read_step_losses(t, out.global_step, source);
    } else {
      fail(kWhere,
           "{}: unexpected tensor {} (expected 'model.*', 'optimizer.<i>.*' for {} "
           "optimizer(s) or '{}')",
           source, quote_untrusted(name), out.optimizers.size(), kStepLossesTensor);
    }
  }
}

// The layers a state dict holds in 4-/8-bit storage, sorted: "h0.attn.in_proj" for its
// "h0.attn.in_proj.base_layer.weight.absmax" (4-bit, under a LoRA adapter) or an int8 layer's
// "<layer>.SCB". int8-training's layers keep float weights and show nothing.
std::vector<std::string> quantized_layers(const nn::StateDict& state) {
  std::set<std::string> layers;
  for (const auto& [name, t] : state) {
    for (const std::string_view suffix :
         {std::string_view(".weight.absmax"), std::string_view(".SCB")}) {
      if (name.size() <= suffix.size() || !name.ends_with(suffix)) continue;
      std::string layer = name.substr(0, name.size() - suffix.size());
      constexpr std::string_view kBase = ".base_layer";
      if (layer.ends_with(kBase)) layer.resize(layer.size() - kBase.size());
      layers.insert(layer);
    }
  }
  return {layers.begin(), layers.end()};
}

// A plugin state's ignore_modules as a set of names; nullopt when it has none (another plugin,
// an older file) or a damaged one.
std::optional<std::set<std::string>> ignore_modules_of(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("ignore_modules")) return std::nullopt;
  const nlohmann::json& list = state.at("ignore_modules");
  if (!list.is_array()) return std::nullopt;
  std::set<std::string> names;
  for (const nlohmann::json& n : list) {
    if (!n.is_string()) return std::nullopt;
    names.insert(n.get<std::string>());
  }
  return names;
}

// ignore_modules as the --quant-ignore value that gives it ("" for none).
std::string quant_ignore_flag(const std::set<std::string>& names) {
  if (names.empty()) return "\"\"";
  return escape_untrusted(fmt::format("{}", fmt::join(names, ",")));
}

// The quantized precisions keep the layers ignore_modules names (--quant-ignore) in full
// precision, and the checkpoint holds the others in their 4-/8-bit form: a run that quantizes
// other layers cannot take them. Said as that, naming the layers, before the tensor names that
// differ (which listed 4-bit state tensors as "unexpected" and left the cause to the end).
// Lists spelled differently that quantize the same layers are fine; int8-training, whose
// tensors do not show which layers are quantized, compares the lists.
void check_quantized_layers(const nn::StateDict& live, const ValidatedCheckpoint& saved,
                            const Precision& plugin, const std::string& source) {
  const std::optional<std::set<std::string>> saved_ignore = ignore_modules_of(saved.plugin_state);
  const std::optional<std::set<std::string>> live_ignore = ignore_modules_of(plugin.state_dict());
  if (!saved_ignore || !live_ignore || *saved_ignore == *live_ignore) return;
  const std::vector<std::string> in_file = quantized_layers(saved.model);
  const std::vector<std::string> here = quantized_layers(live);
  std::vector<std::string> only_file, only_here;
  std::set_difference(in_file.begin(), in_file.end(), here.begin(), here.end(),
                      std::back_inserter(only_file));
  std::set_difference(here.begin(), here.end(), in_file.begin(), in_file.end(),
                      std::back_inserter(only_here));
  if (!in_file.empty() || !here.empty()) {
    if (only_file.empty() && only_here.empty()) return;
  }
  for (std::string& n : only_file) n = escape_untrusted(n);  // from the file
  std::vector<std::string> differences;
  if (!only_file.empty())
    differences.push_back(
        fmt::format("quantized in the checkpoint but kept in full precision "
                    "here: {}",
                    first_names(only_file)));
  if (!only_here.empty())
    differences.push_back(
        fmt::format("quantized here but not in the checkpoint: {}", first_names(only_here)));
  // int8-training: the lists alone tell.
  const char* what = in_file.empty() && here.empty()
                         ? "this run's ignore_modules differ from the checkpoint's (its "
                           "int8-training layers keep float weights, so which of them it "
                           "quantized is known from the list alone)"
                         : "the set of quantized layers differs from the checkpoint's";
  fail(kWhere,
       "{}: {}{}{}. It was written with "
       "ignore_modules {} (--quant-ignore {}) and this run has {} (--quant-ignore {}): "
       "--quant-ignore must match the run that wrote the checkpoint; resume with --quant-ignore "
       "{}",
       source, what, differences.empty() ? "" : ": ", fmt::join(differences, "; "),
       escape_untrusted(saved.plugin_state.at("ignore_modules").dump()),
       quant_ignore_flag(*saved_ignore), plugin.state_dict().at("ignore_modules").dump(),
       quant_ignore_flag(*live_ignore), quant_ignore_flag(*saved_ignore));
}

// The transformer-engine precisions: a recipe other than the checkpoint's (another
// --fp8-amax-history-len changes the FP8 layers' buffer shapes) or other layers in FP8 (another
// --fp8-exclude changes their tensor names) are said as that, before the tensors that differ
// (which showed as a shape mismatch of fp8_amax_history or unexpected fp8_scale tensors).
void check_fp8_layers(const ValidatedCheckpoint& saved, const Precision& plugin,
                      const std::string& source) {
  const nlohmann::json live = plugin.state_dict();
  const nlohmann::json& file = saved.plugin_state;
  if (!file.is_object() || !live.is_object() || !file.contains("recipe") ||
      !live.contains("recipe") || !file.contains("fp8_meta") || !file.at("fp8_meta").is_object())
    return;
  const fp8::DelayedScaling saved_recipe = fp8::DelayedScaling::from_json(file.at("recipe"));
  const fp8::DelayedScaling live_recipe = fp8::DelayedScaling::from_json(live.at("recipe"));
  MANTISSA_CHECK(saved_recipe == live_recipe, kWhere, "{}: {}", source,
                 fp8::recipe_mismatch(saved_recipe, live_recipe));  // validated values
  std::vector<std::string> only_file, only_here;
  for (const auto& [name, v] : file.at("fp8_meta").items()) {
    // Files written by earlier mantissa versions hold FP8 state for the LoRA adapters, scales
    // nothing reads: the adapters are plain modules, so those entries are skipped.
    const std::string last = name.substr(name.rfind('.') + 1);
    if (last == "lora_A" || last == "lora_B") continue;
    if (!live.at("fp8_meta").contains(name)) only_file.push_back(escape_untrusted(name));
  }
  for (const auto& [name, v] : live.at("fp8_meta").items())
    if (!file.at("fp8_meta").contains(name)) only_here.push_back(name);
  if (only_file.empty() && only_here.empty()) return;
  std::vector<std::string> differences;
  if (!only_file.empty())
    differences.push_back(
        fmt::format("FP8 in the checkpoint but not here: {}", first_names(only_file)));
  if (!only_here.empty())
    differences.push_back(
        fmt::format("FP8 here but not in the checkpoint: {}", first_names(only_here)));
  fail(kWhere,
       "{}: the layers in FP8 differ from the checkpoint's ({}): --fp8-exclude must match the "
       "run that wrote it",
       source, fmt::join(differences, "; "));
}

// A checkpoint of another precision than the run's, both named: "the checkpoint was saved in
// precision 'bf16-mixed' and this run's is 'transformer-engine'".
std::string precisions_differ(const std::string& saved, const std::string& run) {
  return fmt::format("the checkpoint was saved in precision '{}' and this run's is '{}'", saved,
                     run);
}

// What to do about a checkpoint that loads only in its own precision: the commands' ways too
// (train's --init-from refuses a fine-tune's checkpoint, and finetune has no --init-from).
std::string resume_in_precision(const std::string& saved) {
  return fmt::format(
      "Resume with precision '{}' (CLI: --precision {}), or start from its weights only (CLI: "
      "`mantissa train --init-from` for a train run's checkpoint; for a fine-tune's, a new "
      "`mantissa finetune` with --model-dir the directory its run writes at the end, its "
      "--output-dir; library: Module::load_state_dict)",
      saved, saved);
}

// The saved weights must have exactly the module's keys and shapes; parameters the saved
// precision's dtype, floating buffers any floating dtype, other buffers their own dtype.
void check_model_weights(const TrainModule& module, const ValidatedCheckpoint& saved,
                         const Precision& plugin, const std::string& source) {
  const std::string run_precision = plugin.precision();
  const DType saved_dtype = param_dtype_of(saved.precision, source);
  const nn::StateDict live = module.state_dict();
  std::set<std::string> param_names;
  for (const auto& [name, p] : module.named_parameters()) param_names.insert(name);
  if (saved.precision == run_precision) {
    check_quantized_layers(live, saved, plugin, source);
    check_fp8_layers(saved, plugin, source);
  }
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : live) {
    if (!saved.model.contains(name)) missing.push_back(kModelPrefix + name);
  }
  for (const auto& [name, t] : saved.model) {
    if (!live.contains(name)) unexpected.push_back(escape_untrusted(kModelPrefix + name));
  }
  if (!missing.empty() || !unexpected.empty()) {
    // The usual cause: the run is set up differently from the one that saved (quantized
    // layers and LoRA adapters change the tensor names), so say what to match.
    auto has = [](const std::vector<std::string>& names, const char* piece) {
      return std::any_of(names.begin(), names.end(),
                         [&](const std::string& n) { return n.find(piece) != std::string::npos; });
    };
    std::string hint;
    if (saved.precision == run_precision && (has(missing, "lora_") || has(unexpected, "lora_"))) {
      hint =
          "; one side has LoRA adapters and the other not, or of another rank: resume with "
          "the run's --lora-rank";
    }
    // Only the lists that have entries ("missing []" says nothing).
    std::vector<std::string> lists;
    if (!missing.empty()) lists.push_back(fmt::format("missing [{}]", first_names(missing)));
    if (!unexpected.empty())
      lists.push_back(fmt::format("unexpected [{}]", first_names(unexpected)));
    // Another precision's layers (FP8 scales, 4-bit state) are said as that first, both named.
    if (saved.precision != run_precision)
      fail(kWhere, "{}: {}: its weights do not fit this run's {} ({}). {}", source,
           precisions_differ(saved.precision, run_precision), module.name(), fmt::join(lists, ", "),
           resume_in_precision(saved.precision));
    fail(kWhere, "{}: the weights do not fit {}: {}{}", source, module.name(),
         fmt::join(lists, ", "), hint);
  }
  for (const auto& [name, t] : saved.model) {
    const Tensor& target = live.at(name);
    // A 4-bit layer's quant state is JSON text, as long as its floats print: the layer checks
    // its content when it loads.
    MANTISSA_CHECK(t.shape() == target.shape() || quant::is_quant_state_key(name), kWhere,
                   "{}: shape mismatch for 'model.{}': {} in the file, {} in the model{}", source,
                   name, fmt::join(t.shape(), "x"), fmt::join(target.shape(), "x"),
                   name.find("lora_A") != std::string::npos && t.dim() == 2
                       ? fmt::format(" (LoRA adapters of rank {}: resume with adapters of "
                                     "that rank: --lora-rank {}, or finetune's --adapter of "
                                     "rank {} in its place)",
                                     t.size(0), t.size(0), t.size(0))
                       : std::string());
    const bool is_param = param_names.count(name) > 0;
    const DType expected = is_param ? saved_dtype : target.dtype();
    // A parameter in the live model's own dtype fits too: Apex O2/O3 keep fp16 weights (and
    // O2 fp32 BatchNorm) under "16-mixed", whose usual parameter dtype is fp32.
    const bool fits = is_param ? t.dtype() == saved_dtype || t.dtype() == target.dtype()
                      : target.is_floating_point() ? t.is_floating_point()
                                                   : t.dtype() == target.dtype();
    MANTISSA_CHECK(fits, kWhere,
                   "{}: dtype mismatch for 'model.{}': {} in the file, expected {} (saved in {})",
                   source, name, t.dtype().name(), expected.name(), saved.precision);
  }
}

// The state the checkpoint holds for this run's plugin (null when none). State saved by a
// plugin of another class, or in another precision, cannot be given to this plugin: that is an
// error rather than a silent reset (a loss scale or FP8 scaling history would be lost).
nlohmann::json read_plugin_state(const nlohmann::json& meta, const Precision& plugin,
                                 const std::string& saved_precision, const std::string& source) {
  const CheckpointFields fields(meta, source);
  const nlohmann::json& states = fields.require_object("precision_plugin");
  nlohmann::json own;
  for (auto it = states.begin(); it != states.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& state = it.value();
    if (!state.is_object())
      fields.nested("precision_plugin").fail_field(key, "a JSON object", state);
    const bool has_state = !state.empty();
    const bool ours = key == plugin.class_name() && saved_precision == plugin.precision();
    if (has_state && !ours) {
      const std::string why = saved_precision == plugin.precision()
                                  ? fmt::format("saved in precision '{}'", saved_precision)
                                  : precisions_differ(saved_precision, plugin.precision());
      fail(kWhere, "{}: {}: the checkpoint holds {} state, which this run's {} cannot take. {}",
           source, why, escape_untrusted(key), plugin.class_name(),
           resume_in_precision(saved_precision));
    }
    if (ours && has_state) own = state;
  }
  return own;
}

// The dtypes the file's floating parameters change from and to as they are loaded into
// `module` ("float32" -> "bfloat16"), each pair once, in parameter order; and the dtype of the
// first floating parameter the file holds (unset when it holds none).
struct WeightConversions {
  std::vector<std::pair<DType, DType>> pairs;
  std::optional<DType> file_dtype;
};

WeightConversions weight_conversions(const nn::Module& module, const nn::StateDict& weights) {
  WeightConversions out;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!weights.contains(name)) continue;
    const Tensor& t = weights.at(name);
    if (!t.is_floating_point() || !p.is_floating_point()) continue;
    if (!out.file_dtype) out.file_dtype = t.dtype();
    const std::pair<DType, DType> pair{t.dtype(), p.dtype()};
    if (pair.first != pair.second &&
        std::find(out.pairs.begin(), out.pairs.end(), pair) == out.pairs.end())
      out.pairs.push_back(pair);
  }
  return out;
}

// One warning when the weights are loaded into a run of another precision, or converted to
// another dtype: what the file's tensors are and become, not what its precision implies (a
// file that says bf16-true but holds float32 tensors is not "bfloat16 converted to float32"
// in a 32-true run, and is converted to bfloat16 in a bf16-true one).
void warn_if_precision_differs(const Precision& plugin, const std::string& saved_precision,
                               const WeightConversions& conversions, const std::string& source,
                               const char* verb = "resumes in") {
  const bool same_precision = saved_precision == plugin.precision();
  if (conversions.pairs.empty()) {
    if (same_precision) return;
    // The saved precision was checked to be known (param_dtype_of) before this runs.
    const DType stays = conversions.file_dtype.value_or(param_dtype_of(saved_precision, source));
    warn(fmt::format("checkpoint {} was saved in {} and {} {}; its weights stay {}", source,
                     saved_precision, verb, plugin.precision(), stays.name()));
    return;
  }
  std::vector<std::string> changes;
  for (const auto& [from, to] : conversions.pairs)
    changes.push_back(fmt::format("{} weights are converted to {}", from.name(), to.name()));
  if (same_precision) {
    warn(
        fmt::format("checkpoint {} was saved in {} but holds weights of another dtype: its {} "
                    "for {}",
                    source, saved_precision, fmt::join(changes, ", its "), plugin.precision()));
    return;
  }
  warn(fmt::format("checkpoint {} was saved in {}; its {} for {}", source, saved_precision,
                   fmt::join(changes, ", its "), plugin.precision()));
}

// The FP8 layers' scales and amax histories, as eval and --resume both load them (the tensors
// are the state; a resume also checks the plugin's copy against them): refused, naming the
// tensor and the value, before anything is loaded.
void check_fp8_state(const nn::StateDict& model, const std::string& source) {
  try {
    fp8::check_state_tensors(model);
  } catch (const Error& e) {
    fail(kWhere, "{}: {}", source, e.what());
  }
}

ValidatedCheckpoint validate_checkpoint(Trainer& trainer, const CheckpointContents& contents,
                                        const std::string& source) {
  const nlohmann::json meta = parse_metadata(contents, source);
  ValidatedCheckpoint out;
  read_position(meta, source, out);
  const CheckpointFields fields(meta, source);
  out.precision = fields.require_string("precision");
  param_dtype_of(out.precision, source);  // an unknown precision fails before anything else
  out.optimizers = read_optimizer_metas(meta, trainer.optimizers(), source);
  out.plugin_state = read_plugin_state(meta, trainer.precision_plugin(), out.precision, source);
  out.schedulers = read_schedulers(meta, trainer, source);
  out.callbacks = read_callback_states(fields);
  out.rng = read_rng(meta, source);
  if (fields.has("callback_metrics")) out.metrics = fields.require_metrics("callback_metrics");
  if (fields.has("validation_due")) out.validation_due = fields.require_bool("validation_due");
  if (fields.has("epoch_end_due")) out.epoch_end_due = fields.require_bool("epoch_end_due");
  if (fields.has("epoch_sums")) out.epoch_sums = read_epoch_sums(fields);
  if (meta.contains("module")) {
    out.module_state = meta.at("module");
    MANTISSA_CHECK(out.module_state.is_object(), kWhere,
                   "{}: metadata field 'module' must be a JSON object, got {}", source,
                   out.module_state.type_name());
  }
  split_tensors(contents, source, out);
  out.model = trainer.module()->upgrade_legacy_keys(out.model);  // files of earlier layouts
  check_fp8_state(out.model, source);
  check_model_weights(*trainer.module(), out, trainer.precision_plugin(), source);
  check_optimizer_state_dtypes(*trainer.module(), trainer.optimizers(), out.optimizers, out.model,
                               source);
  if (out.precision == trainer.precision_plugin().precision()) {
    try {
      check_fp8_meta_matches_tensors(out.plugin_state, out.model);
    } catch (const Error& e) {
      fail(kWhere, "{}: {}", source, e.what());
    }
  }
  out.resume = plan_resume(trainer, meta, out.epoch, out.batches, out.schedulers, source);
  return out;
}

// Weights a file brought in must be finite: NaN or inf there means a damaged file, or a run
// that had diverged when it saved, and training or evaluating them would only report a NaN
// loss (with advice about the learning rate that does not apply).
void check_loaded_weights_finite(const nn::Module& module) {
  const ParameterRange r = parameter_range(module);
  MANTISSA_CHECK(r.non_finite_name.empty(), "weights",
                 "parameter '{}' holds a non-finite value ({}): the file is damaged, or the run "
                 "that wrote it had diverged; use an earlier checkpoint",
                 r.non_finite_name, r.non_finite_value);
  // The quantized layers' scales and code books: frozen, so NaN there is damage to the file
  // (it passed, and training failed later with advice about the learning rate).
  const NonFiniteTensor q = non_finite_quantized_state(module);
  MANTISSA_CHECK(q.name.empty(), "weights",
                 "'{}' of a quantized layer's stored weight holds a non-finite value ({}): the "
                 "file is damaged; use an earlier checkpoint",
                 q.name, q.value);
  // A negative scale is finite, and loaded it flipped the sign of the weights it scales: the
  // run or evaluation went on with other weights than those saved, without a word.
  const NonFiniteTensor neg = negative_quantized_scale(module);
  MANTISSA_CHECK(neg.name.empty(), "weights",
                 "'{}' of a quantized layer's stored weight holds a negative scale ({:g}), which "
                 "a largest magnitude (of a block, or a row's SCB) never is: the file is damaged; "
                 "use an earlier checkpoint",
                 neg.name, neg.value);
}

// Applies a validated checkpoint. The parts' own loaders may still reject something (the
// optimizer checks its state tensors); then everything is put back as it was.
void commit(Trainer& trainer, const ValidatedCheckpoint& saved, const CheckpointContents& contents,
            const std::string& source) {
  const Snapshot before = take_snapshot(trainer);
  bool verifying_checksums = false;  // its errors name the source already
  try {
    trainer.module()->load_state_dict(saved.model);
    check_loaded_weights_finite(*trainer.module());
    for (size_t i = 0; i < saved.optimizers.size(); ++i)
      trainer.optimizers()[i]->load_state_dict(saved.optimizers[i]);
    if (!saved.plugin_state.is_null())
      trainer.precision_plugin().load_state_dict(saved.plugin_state);
    for (size_t i = 0; i < saved.schedulers.size(); ++i) {
      trainer.lr_schedulers()[i].scheduler->load_state_dict(saved.schedulers[i]);
    }
    for (const auto& c : trainer.callbacks()) {
      if (saved.callbacks.is_object() && saved.callbacks.contains(c->state_key())) {
        c->load_state_dict(saved.callbacks[c->state_key()]);
      }
    }
    default_generator().set_state(saved.rng);
    CheckpointAccess::set_position(trainer, saved.epoch, saved.global_step,
                                   saved.resume.batches_in_epoch);
    CheckpointAccess::metrics(trainer) = saved.metrics;
    if (saved.step_losses) CheckpointAccess::step_losses(trainer) = *saved.step_losses;
    CheckpointAccess::validation_due(trainer) = saved.validation_due;
    CheckpointAccess::logger_step(trainer) = saved.loggers_step.value_or(saved.global_step);
    // The sums of an epoch this run counts as finished without running its end (fewer
    // batches per epoch now) would be added to the next epoch's.
    const bool in_epoch = saved.resume.batches_in_epoch < trainer.num_training_batches();
    CheckpointAccess::epoch_end_due(trainer) = saved.epoch_end_due;
    CheckpointAccess::epoch_sums(trainer) =
        in_epoch || saved.epoch_end_due ? saved.epoch_sums : CheckpointAccess::EpochSums{};
    apply_resume_plan(trainer, saved.resume);
    trainer.module()->on_load_checkpoint(saved.module_state);
    // Last: damage that every check above names in its own words is said so; the checksums
    // catch what passed them all (a flipped digit of the RNG state, a flipped bit of a weight).
    verifying_checksums = true;
    verify_checkpoint_checksums(contents, source);
  } catch (const Error& e) {
    apply_snapshot(trainer, before);
    if (verifying_checksums) throw;
    fail(kWhere, "{}: {}", source, e.what());
  }
}

}  // namespace

// The precision a checkpoint or weights file says its weights were trained in, when it names one
// this build knows (a weights file without the entry: its float32 weights, 32-true).
std::optional<std::string> saved_float_precision(const CheckpointContents& contents) {
  std::string name = "32-true";
  if (auto it = contents.metadata.find(kCheckpointMetadataKey); it != contents.metadata.end()) {
    const nlohmann::json meta =
        nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!meta.is_object() || !meta.contains("precision") || !meta.at("precision").is_string())
      return std::nullopt;
    name = meta.at("precision").get<std::string>();
  } else if (auto p = contents.metadata.find("precision"); p != contents.metadata.end()) {
    name = p->second;
  }
  const PrecisionEntry* entry = find_precision(name);
  if (entry == nullptr || !entry->implemented || entry->name != name) return std::nullopt;
  return name;
}

void load_checkpoint_weights(nn::Module& module, const std::string& path, const Precision* plugin) {
  const CheckpointContents contents = load_checkpoint_file(path);
  nn::StateDict weights;
  for (const auto& [name, t] : contents.tensors) {
    if (starts_with(name, kModelPrefix)) weights.insert(name.substr(kModelPrefix.size()), t);
  }
  MANTISSA_CHECK(!weights.empty(), kWhere,
                 "{}: no weights in the file (no 'model.*' tensor): not a mantissa checkpoint or "
                 "weights file",
                 path);
  check_fp8_state(weights, path);
  // Before the load, which converts them to the module's dtypes.
  const WeightConversions conversions =
      weight_conversions(module, module.upgrade_legacy_keys(weights));
  try {
    module.load_state_dict(weights, /*strict=*/true);
  } catch (const Error& e) {
    fail(kWhere, "{}: the weights do not fit {}: {}", path, module.name(), e.what());
  }
  try {
    check_loaded_weights_finite(module);
  } catch (const Error& e) {
    fail(kWhere, "{}: {}", path, e.what());
  }
  // The weights and the trainer metadata against the file's checksums (when it has them).
  verify_checkpoint_checksums(
      contents, path, [](const std::string& name) { return starts_with(name, kModelPrefix); });
  // As a resume does: weights of another precision are converted, and that is said.
  if (plugin == nullptr) return;
  if (const std::optional<std::string> saved = saved_float_precision(contents))
    warn_if_precision_differs(*plugin, *saved, conversions, path, "is evaluated in");
}

void restore_checkpoint(Trainer& trainer, const CheckpointContents& contents,
                        const std::string& source) {
  const ValidatedCheckpoint saved = validate_checkpoint(trainer, contents, source);
  warn_if_precision_differs(trainer.precision_plugin(), saved.precision,
                            weight_conversions(*trainer.module(), saved.model), source);
  print_resume_warnings(saved.resume);
  commit(trainer, saved, contents, source);
}

}  // namespace mantissa::train
