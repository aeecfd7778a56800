// Collecting and restoring a trainer's state. Restoring is validate-then-commit: everything in
// the file is checked against the live module, optimizer and schedulers first; the commit then
// applies it, and should any part still fail, the snapshot taken before puts everything back.
#include "mantissa/train/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/train/precision_factory.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

// The Trainer's private counters, for checkpoints only.
struct CheckpointAccess {
  static void set_position(Trainer& t, int64_t epoch, int64_t global_step, int64_t batches) {
    t.epoch_ = epoch;
    t.global_step_ = global_step;
    t.batches_in_epoch_ = batches;
  }
  static std::map<std::string, double>& metrics(Trainer& t) { return t.callback_metrics_; }
};

namespace {

constexpr const char* kWhere = "checkpoint";
const std::string kModelPrefix = "model.";
const std::string kOptimizerPrefix = "optimizer.0.";

// The dtype parameters have under a precision (of a checkpoint's metadata).
DType param_dtype_of(const std::string& precision, const std::string& source) {
  if (precision == "32-true" || precision == "16-mixed" || precision == "bf16-mixed") {
    return kFloat32;
  }
  if (precision == "64-true") return kFloat64;
  if (precision == "16-true") return kFloat16;
  if (precision == "bf16-true") return kBFloat16;
  fail(kWhere, "{}: unknown precision '{}' in the metadata", source, precision);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& source) {
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    fail(kWhere, "{}: metadata field '{}' is missing or mistyped ({})", source, key, e.what());
  }
}

struct Snapshot {
  nn::StateDict model;
  optim::OptimizerState optimizer;
  nlohmann::json plugin;
  std::vector<nlohmann::json> schedulers;
  std::vector<nlohmann::json> callbacks;
  std::string rng;
  int64_t epoch, global_step, batches;
  std::map<std::string, double> metrics;
};

Snapshot take_snapshot(Trainer& t) {
  Snapshot s;
  for (const auto& [k, v] : t.module()->state_dict()) s.model.insert(k, v.clone());
  s.optimizer = t.optimizer()->state_dict();
  for (auto& [k, v] : s.optimizer.tensors) v = v.clone();
  s.plugin = t.precision_plugin().state_dict();
  for (const auto& c : t.lr_schedulers()) s.schedulers.push_back(c.scheduler->state_dict());
  for (const auto& c : t.callbacks()) s.callbacks.push_back(c->state_dict());
  s.rng = default_generator().state();
  s.epoch = t.current_epoch();
  s.global_step = t.global_step();
  s.batches = t.batches_in_epoch();
  s.metrics = t.callback_metrics();
  return s;
}

void apply_snapshot(Trainer& t, const Snapshot& s) {
  t.module()->load_state_dict(s.model);
  t.optimizer()->load_state_dict(s.optimizer);
  if (!s.plugin.empty()) t.precision_plugin().load_state_dict(s.plugin);
  for (size_t i = 0; i < s.schedulers.size(); ++i) {
    t.lr_schedulers()[i].scheduler->load_state_dict(s.schedulers[i]);
  }
  for (size_t i = 0; i < s.callbacks.size(); ++i) t.callbacks()[i]->load_state_dict(s.callbacks[i]);
  default_generator().set_state(s.rng);
  CheckpointAccess::set_position(t, s.epoch, s.global_step, s.batches);
  CheckpointAccess::metrics(t) = s.metrics;
}

}  // namespace

CheckpointContents collect_checkpoint(Trainer& trainer) {
  MANTISSA_CHECK(trainer.module() != nullptr && trainer.optimizer() != nullptr, kWhere,
                 "the trainer has no module and optimizer to save (call fit first)");
  CheckpointContents out;
  for (const auto& [name, t] : trainer.module()->state_dict()) {
    out.tensors.emplace_back(kModelPrefix + name, t.clone());
  }
  const optim::OptimizerState opt = trainer.optimizer()->state_dict();
  for (const auto& [key, t] : opt.tensors)
    out.tensors.emplace_back(kOptimizerPrefix + key, t.clone());

  nlohmann::json j;
  j["format"] = "mantissa-checkpoint";
  j["version"] = kCheckpointFormatVersion;
  j["epoch"] = trainer.current_epoch();
  j["global_step"] = trainer.global_step();
  j["batches_in_epoch"] = trainer.batches_in_epoch();
  j["precision"] = trainer.precision_plugin().precision();
  j["optimizers"] = nlohmann::json::array({opt.meta});
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
  j["loggers_step"] = trainer.global_step();
  j["callback_metrics"] = trainer.callback_metrics();
  out.metadata[kCheckpointMetadataKey] = j.dump();
  return out;
}

void restore_checkpoint(Trainer& trainer, const CheckpointContents& contents,
                        const std::string& source) {
  TrainModule& module = *trainer.module();
  optim::Optimizer& optimizer = *trainer.optimizer();

  // ---- metadata ----
  auto meta_it = contents.metadata.find(kCheckpointMetadataKey);
  MANTISSA_CHECK(meta_it != contents.metadata.end(), kWhere,
                 "{}: no '{}' entry in the file's __metadata__: not a mantissa checkpoint", source,
                 kCheckpointMetadataKey);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_it->second);
  } catch (const nlohmann::json::exception& e) {
    fail(kWhere, "{}: the '{}' metadata is not valid JSON ({})", source, kCheckpointMetadataKey,
         e.what());
  }
  MANTISSA_CHECK(meta.is_object(), kWhere, "{}: the '{}' metadata is not a JSON object", source,
                 kCheckpointMetadataKey);
  const int version = field<int>(meta, "version", source);
  MANTISSA_CHECK(version == kCheckpointFormatVersion, kWhere,
                 "{}: checkpoint format version {} is not supported (this build reads {})", source,
                 version, kCheckpointFormatVersion);
  const auto epoch = field<int64_t>(meta, "epoch", source);
  const auto global_step = field<int64_t>(meta, "global_step", source);
  const auto batches = field<int64_t>(meta, "batches_in_epoch", source);
  MANTISSA_CHECK(epoch >= 0 && global_step >= 0 && batches >= 0, kWhere,
                 "{}: negative position (epoch {}, global_step {}, batches_in_epoch {})", source,
                 epoch, global_step, batches);
  const auto saved_precision = field<std::string>(meta, "precision", source);
  const DType saved_dtype = param_dtype_of(saved_precision, source);
  const auto optimizers = field<nlohmann::json>(meta, "optimizers", source);
  MANTISSA_CHECK(optimizers.is_array() && optimizers.size() == 1, kWhere,
                 "{}: expected the state of 1 optimizer, found {}", source,
                 optimizers.is_array() ? optimizers.size() : 0);
  const std::string saved_opt = optimizers[0].value("optimizer", std::string("?"));
  MANTISSA_CHECK(saved_opt == optimizer.name(), kWhere,
                 "{}: the checkpoint holds the state of a {} optimizer, the module's is a {}",
                 source, saved_opt, optimizer.name());
  const auto plugin_states = field<nlohmann::json>(meta, "precision_plugin", source);
  const auto schedulers = field<nlohmann::json>(meta, "lr_schedulers", source);
  MANTISSA_CHECK(schedulers.is_array() && schedulers.size() == trainer.lr_schedulers().size(),
                 kWhere, "{}: the checkpoint has {} LR schedulers, configure_optimizers() {}",
                 source, schedulers.is_array() ? schedulers.size() : 0,
                 trainer.lr_schedulers().size());
  for (size_t i = 0; i < schedulers.size(); ++i) {
    const std::string name = schedulers[i].value("name", std::string("?"));
    MANTISSA_CHECK(name == trainer.lr_schedulers()[i].scheduler->name(), kWhere,
                   "{}: LR scheduler {} is a {} in the checkpoint but a {} here", source, i, name,
                   trainer.lr_schedulers()[i].scheduler->name());
  }
  const auto callbacks = field<nlohmann::json>(meta, "callbacks", source);
  const auto rng = field<std::string>(meta, "rng", source);
  {
    Generator probe;
    try {
      probe.set_state(rng);
    } catch (const Error&) {
      fail(kWhere, "{}: corrupt RNG state in the metadata", source);
    }
  }
  std::map<std::string, double> metrics;
  if (meta.contains("callback_metrics")) {
    metrics = field<std::map<std::string, double>>(meta, "callback_metrics", source);
  }

  // ---- tensors ----
  nn::StateDict model_state;
  optim::OptimizerState opt_state;
  opt_state.meta = optimizers[0];
  for (const auto& [name, t] : contents.tensors) {
    if (starts_with(name, kModelPrefix)) {
      model_state.insert(name.substr(kModelPrefix.size()), t);
    } else if (starts_with(name, kOptimizerPrefix)) {
      opt_state.tensors[name.substr(kOptimizerPrefix.size())] = t;
    } else {
      fail(kWhere, "{}: unexpected tensor '{}' (expected 'model.*' or 'optimizer.0.*')", source,
           name);
    }
  }
  const nn::StateDict live = module.state_dict();
  std::set<std::string> param_names;
  for (const auto& [name, p] : module.named_parameters()) param_names.insert(name);
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : live) {
    if (!model_state.contains(name)) missing.push_back(kModelPrefix + name);
  }
  for (const auto& [name, t] : model_state) {
    if (!live.contains(name)) unexpected.push_back(kModelPrefix + name);
  }
  MANTISSA_CHECK(missing.empty() && unexpected.empty(), kWhere,
                 "{}: the weights do not fit {}: missing [{}], unexpected [{}]", source,
                 module.name(), fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  for (const auto& [name, t] : model_state) {
    const Tensor& target = live.at(name);
    MANTISSA_CHECK(t.shape() == target.shape(), kWhere,
                   "{}: shape mismatch for 'model.{}': {} in the file, {} in the model", source,
                   name, fmt::join(t.shape(), "x"), fmt::join(target.shape(), "x"));
    // Parameters carry the saved precision's dtype; floating buffers any floating dtype.
    const bool is_param = param_names.count(name) > 0;
    const DType expected = is_param ? saved_dtype : target.dtype();
    const bool fits = is_param                     ? t.dtype() == saved_dtype
                      : target.is_floating_point() ? t.is_floating_point()
                                                   : t.dtype() == target.dtype();
    MANTISSA_CHECK(fits, kWhere,
                   "{}: dtype mismatch for 'model.{}': {} in the file, expected {} (saved in {})",
                   source, name, t.dtype().name(), expected.name(), saved_precision);
  }
  const std::string current_precision = trainer.precision_plugin().precision();
  if (saved_precision != current_precision) {
    fmt::print(stderr,
               "mantissa: warning: checkpoint {} was saved in {}; its weights are converted to "
               "{} for {}\n",
               source, saved_precision, trainer.precision_plugin().param_dtype().name(),
               current_precision);
  }
  nlohmann::json plugin_state;
  const std::string plugin_key = trainer.precision_plugin().class_name();
  if (plugin_states.is_object() && plugin_states.contains(plugin_key)) {
    plugin_state = plugin_states[plugin_key];
  }

  // ---- commit (rolled back on any failure) ----
  const Snapshot before = take_snapshot(trainer);
  try {
    module.load_state_dict(model_state);
    optimizer.load_state_dict(opt_state);
    if (trainer.precision_plugin().scaler() != nullptr && plugin_state.is_object() &&
        !plugin_state.empty()) {
      trainer.precision_plugin().load_state_dict(plugin_state);
    }
    for (size_t i = 0; i < schedulers.size(); ++i) {
      trainer.lr_schedulers()[i].scheduler->load_state_dict(schedulers[i]);
    }
    for (const auto& c : trainer.callbacks()) {
      if (callbacks.is_object() && callbacks.contains(c->state_key())) {
        c->load_state_dict(callbacks[c->state_key()]);
      }
    }
    default_generator().set_state(rng);
    CheckpointAccess::set_position(trainer, epoch, global_step, batches);
    CheckpointAccess::metrics(trainer) = metrics;
  } catch (const Error& e) {
    apply_snapshot(trainer, before);
    fail(kWhere, "{}: {}", source, e.what());
  }
}

}  // namespace mantissa::train
