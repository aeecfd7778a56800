// peft LoRA adapter directories: read, write and load into a model's layers.
#include "mantissa/models/peft_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"
#include "text/regex.h"
#include "train/parameter_range.h"

namespace mantissa::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr const char* kWhere = "adapter";

// A file's path for a message, whole (escaped; paths from the command line run long).
std::string quoted_path(const std::string& path) { return quote_untrusted(path, 4096); }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MANTISSA_CHECK(in.good(), kWhere, "cannot open {} (a peft adapter directory holds {} and {})",
                 quoted_path(path), kPeftConfigFile, kPeftWeightsFile);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// A field that must be absent, null, false or empty: a feature that changes the math and is not
// implemented.
void refuse_if_set(const json& config, const std::string& path, const char* key, const char* what) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return;
  if ((it->is_boolean() && !it->get<bool>()) || (it->is_object() && it->empty()) ||
      (it->is_array() && it->empty()))
    return;
  fail(kWhere, "{}: field '{}' is {} ({}), which mantissa does not implement", quoted_path(path),
       key, io::json_excerpt(*it), what);
}

template <class T>
T number_field(const json& config, const std::string& path, const char* key, T fallback,
               bool required) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    MANTISSA_CHECK(!required, kWhere, "{}: field '{}' is missing", quoted_path(path), key);
    return fallback;
  }
  MANTISSA_CHECK(it->is_number(), kWhere, "{}: field '{}' must be a number, got {}",
                 quoted_path(path), key, io::json_excerpt(*it));
  if constexpr (std::is_integral_v<T>) {
    MANTISSA_CHECK(it->is_number_integer(), kWhere, "{}: field '{}' must be a whole number, got {}",
                   quoted_path(path), key, io::json_excerpt(*it));
  }
  return it->get<T>();
}

// target_modules: a list of layer names, or one string, a regular expression that a layer's
// whole name must match (peft's check_target_module_exists), compiled here so that a malformed
// one is named with its file.
void read_target_modules(const json& config, const std::string& path, PeftAdapterConfig& c) {
  const auto targets = config.find("target_modules");
  if (targets != config.end() && targets->is_string() && !targets->get<std::string>().empty()) {
    c.target_regex = targets->get<std::string>();
    text::detail::Regex::full_match(
        c.target_regex, kWhere,
        fmt::format("{}: field 'target_modules' (a regular expression, as peft reads a string)",
                    quoted_path(path)));
    return;
  }
  MANTISSA_CHECK(targets != config.end() && targets->is_array() && !targets->empty(), kWhere,
                 "{}: field 'target_modules' must be a list of layer names or a regular "
                 "expression, got {}",
                 quoted_path(path),
                 targets == config.end() ? "nothing" : io::json_excerpt(*targets));
  for (const json& t : *targets) {
    MANTISSA_CHECK(t.is_string() && !t.get<std::string>().empty(), kWhere,
                   "{}: field 'target_modules' holds {}, not a layer name", quoted_path(path),
                   io::json_excerpt(t));
    c.target_modules.push_back(t.get<std::string>());
  }
}

}  // namespace

nn::LoraConfig to_lora_config(const PeftAdapterConfig& config) {
  return {.r = config.r,
          .alpha = config.lora_alpha,
          .dropout = config.lora_dropout,
          .target_modules = config.target_modules,
          .target_regex = config.target_regex};
}

PeftAdapterConfig read_peft_adapter_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / kPeftConfigFile).string();
  const std::string text = read_text(path);
  json config = io::parse_untrusted_json(text, kWhere, quoted_path(path));
  MANTISSA_CHECK(config.is_object(), kWhere, "{}: expected a JSON object", quoted_path(path));
  const auto type = config.find("peft_type");
  MANTISSA_CHECK(type != config.end() && type->is_string() && type->get<std::string>() == "LORA",
                 kWhere, "{}: field 'peft_type' is {}; only LoRA adapters (\"LORA\") load",
                 quoted_path(path), type == config.end() ? "missing" : io::json_excerpt(*type));
  refuse_if_set(config, path, "use_rslora", "rank-stabilised scaling alpha / sqrt(r)");
  refuse_if_set(config, path, "use_dora", "weight-decomposed adapters");
  refuse_if_set(config, path, "rank_pattern", "a rank per layer");
  refuse_if_set(config, path, "alpha_pattern", "an alpha per layer");
  refuse_if_set(config, path, "modules_to_save", "fully trained extra modules");
  refuse_if_set(config, path, "layers_to_transform", "adapters on some layers only");
  refuse_if_set(config, path, "layer_replication", "replicated layers");
  if (const auto bias = config.find("bias"); bias != config.end() && !bias->is_null()) {
    MANTISSA_CHECK(bias->is_string() && bias->get<std::string>() == "none", kWhere,
                   "{}: field 'bias' is {}; only \"none\" (no trained biases) is implemented",
                   quoted_path(path), io::json_excerpt(*bias));
  }
  PeftAdapterConfig c;
  c.r = number_field<int64_t>(config, path, "r", 8, true);
  c.lora_alpha = number_field<double>(config, path, "lora_alpha", 8, true);
  c.lora_dropout = number_field<double>(config, path, "lora_dropout", 0, false);
  read_target_modules(config, path, c);
  if (const auto f = config.find("fan_in_fan_out"); f != config.end() && f->is_boolean())
    c.fan_in_fan_out = f->get<bool>();
  if (const auto b = config.find("base_model_name_or_path"); b != config.end() && b->is_string())
    c.base_model_name_or_path = b->get<std::string>();
  try {
    nn::validate({.r = c.r, .alpha = c.lora_alpha, .dropout = c.lora_dropout});
  } catch (const Error& e) {
    fail(kWhere, "{}: {}", quoted_path(path), e.what());
  }
  return c;
}

void save_peft_adapter(const nn::Module& model, const PeftAdapterConfig& config,
                       const std::string& dir) {
  const nn::StateDict adapters = nn::lora_state_dict(model);
  MANTISSA_CHECK(!adapters.empty(), kWhere, "the model holds no LoRA adapter to save");
  io::prepare_output_dir(dir, "--output-dir");
  io::NamedTensors tensors;
  for (const auto& [name, t] : adapters) tensors.emplace_back(kPeftKeyPrefix + name, t.detach());
  io::sort_like_python_safetensors(tensors);
  io::save_safetensors((fs::path(dir) / kPeftWeightsFile).string(), tensors, {{"format", "pt"}});
  json c = json::object();
  c["peft_type"] = "LORA";
  c["task_type"] = "CAUSAL_LM";
  c["r"] = config.r;
  c["lora_alpha"] = config.lora_alpha;
  c["lora_dropout"] = config.lora_dropout;
  // A regex goes back as the string it came as: peft reads either form.
  c["target_modules"] =
      config.target_regex.empty() ? json(config.target_modules) : json(config.target_regex);
  c["bias"] = "none";
  c["fan_in_fan_out"] = config.fan_in_fan_out;
  c["base_model_name_or_path"] = config.base_model_name_or_path;
  c["inference_mode"] = true;
  c["init_lora_weights"] = true;
  c["use_rslora"] = false;
  c["use_dora"] = false;
  c["modules_to_save"] = nullptr;
  c["layers_to_transform"] = nullptr;
  c["rank_pattern"] = json::object();
  c["alpha_pattern"] = json::object();
  io::write_text_file_atomically((fs::path(dir) / kPeftConfigFile).string(), c.dump(2) + "\n",
                                 "--output-dir");
}

std::vector<std::string> load_peft_adapter(nn::Module& model, const std::string& dir) {
  const PeftAdapterConfig config = read_peft_adapter_config(dir);
  const std::string path = (fs::path(dir) / kPeftWeightsFile).string();
  MANTISSA_CHECK(fs::exists(path), kWhere, "{} is missing (the adapter's weights)",
                 quoted_path(path));
  const io::SafetensorsFile file = io::load_safetensors(path);
  // An adapter of another base model (another architecture's layer names), or a regex that
  // names no layer, wraps nothing here: said as that, not as a list of targets and layers.
  const nn::LoraConfig lora = to_lora_config(config);
  const auto targeted = nn::lora_target_matcher(lora);
  std::string first_layer;
  bool any = false;
  for (const auto& [name, m] : model.named_modules()) {
    if (!nn::linear_features(*m)) continue;
    if (first_layer.empty()) first_layer = name;
    any = any || targeted(name);
  }
  const std::string base = config.base_model_name_or_path.empty()
                               ? ""
                               : fmt::format(" (its base_model_name_or_path: {})",
                                             quoted_path(config.base_model_name_or_path));
  const std::string config_path = quoted_path((fs::path(dir) / kPeftConfigFile).string());
  MANTISSA_CHECK(any || config.target_regex.empty(), kWhere,
                 "{}: the adapter's target_modules, the regular expression {}, matches no layer "
                 "of this model (it must match a layer's whole name, such as '{}'): correct it, "
                 "or apply the adapter to the base model it was trained on{}",
                 config_path, quote_untrusted(config.target_regex, 200), first_layer, base);
  MANTISSA_CHECK(any, kWhere,
                 "{}: the adapter's target_modules {} match no layer of this model: it was "
                 "trained on another base model{}; apply it to that one",
                 config_path, nn::lora_targets_text(lora), base);
  const std::vector<std::string> wrapped = nn::apply_lora(model, lora);
  const nn::StateDict own = nn::lora_state_dict(model);
  std::set<std::string> seen;
  NoGradGuard no_grad;
  for (const auto& [key, t] : file.tensors) {
    const std::string_view k(key);
    MANTISSA_CHECK(k.starts_with(kPeftKeyPrefix), kWhere,
                   "{}: tensor {} does not start with '{}' (not a peft adapter file)",
                   quoted_path(path), quote_untrusted(key), kPeftKeyPrefix);
    std::string name(k.substr(std::string_view(kPeftKeyPrefix).size()));
    // Files of some peft versions keep the adapter name: "...lora_A.default.weight".
    if (const size_t at = name.find(".default.weight");
        at != std::string::npos && at + 15 == name.size())
      name = name.substr(0, at) + ".weight";
    MANTISSA_CHECK(own.contains(name), kWhere,
                   "{}: tensor {} is no adapter of this model (its target_modules wrap {} "
                   "layers, e.g. '{}')",
                   quoted_path(path), quote_untrusted(key), wrapped.size(),
                   wrapped.empty() ? "" : wrapped.front());
    Tensor dst = own.at(name);
    MANTISSA_CHECK(t.shape() == dst.shape(), kWhere,
                   "{}: tensor {} has shape {}, the model's adapter has {} (another base model "
                   "or rank?)",
                   quoted_path(path), quote_untrusted(key), shape_str(t.shape()),
                   shape_str(dst.shape()));
    MANTISSA_CHECK(t.dtype().is_floating_point(), kWhere, "{}: tensor {} has dtype {}",
                   quoted_path(path), quote_untrusted(key), t.dtype().name());
    if (const std::optional<double> bad = train::non_finite_value(t))
      fail(kWhere,
           "{}: tensor {} holds a non-finite value ({}): the file is damaged, or the run that "
           "trained the adapter had diverged; use another adapter (such as an earlier run's)",
           quoted_path(path), quote_untrusted(key), *bad);
    dst.copy_(t);
    seen.insert(name);
  }
  for (const auto& [name, t] : own) {
    MANTISSA_CHECK(seen.count(name) != 0, kWhere, "{}: tensor '{}{}' is missing", quoted_path(path),
                   kPeftKeyPrefix, name);
  }
  return wrapped;
}

}  // namespace mantissa::models
