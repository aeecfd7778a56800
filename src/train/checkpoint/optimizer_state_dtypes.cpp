#include "train/checkpoint/optimizer_state_dtypes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/safetensors.h"

namespace mantissa::train {
namespace {

// "state.<id>.<buffer>": the id and the buffer; nullopt for another form.
std::optional<std::pair<int64_t, std::string>> parse_state_key(const std::string& key) {
  constexpr std::string_view kState = "state.";
  if (!key.starts_with(kState)) return std::nullopt;
  const size_t dot = key.find('.', kState.size());
  if (dot == std::string::npos || dot == kState.size() || dot + 1 >= key.size() ||
      dot - kState.size() > 9)
    return std::nullopt;
  const std::string id = key.substr(kState.size(), dot - kState.size());
  if (!std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c) != 0; }))
    return std::nullopt;
  return std::make_pair(std::stoll(id), key.substr(dot + 1));
}

// The dtype mantissa's optimizers write a state buffer in for a parameter of `param_dtype`
// (optim/optimizer.h, HalfPrecisionOptions): the 8-bit ones keep uint8 codes (state1, state2)
// and everything else in fp32; Adam, AdamW and SGD keep fp32 master weights, and the moments
// or momentum in the parameter's dtype, except fp32 for a half parameter of a group with
// master_weights or fp32_state (`group`: its options, the saved ones first). nullopt for an
// optimizer of another kind, whose layout only its own loader knows.
std::optional<DType> written_dtype(std::string_view optimizer, const std::string& buffer,
                                   DType param_dtype, const nlohmann::json& saved_group,
                                   const nlohmann::json& live_group) {
  if (optimizer == "Adam8bit" || optimizer == "AdamW8bit")
    return buffer == "state1" || buffer == "state2" ? kUInt8 : kFloat32;
  if (optimizer != "Adam" && optimizer != "AdamW" && optimizer != "SGD") return std::nullopt;
  if (buffer == "master_param") return kFloat32;
  // master_weights and fp32_state fix the layout: the state was written under the saved ones.
  const auto flag = [&](const char* key) {
    for (const nlohmann::json* group : {&saved_group, &live_group}) {
      if (group->is_object() && group->contains(key) && group->at(key).is_boolean())
        return group->at(key).get<bool>();
    }
    return false;
  };
  const bool half = param_dtype == kFloat16 || param_dtype == kBFloat16;
  return half && (flag("master_weights") || flag("fp32_state")) ? kFloat32 : param_dtype;
}

// "F16 (float16)": the header's name and mantissa's.
std::string dtype_text(DType dtype) {
  return fmt::format("{} ({})", io::safetensors_dtype_name(dtype), dtype.name());
}

}  // namespace

void check_optimizer_state_dtypes(const nn::Module& module,
                                  const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers,
                                  const std::vector<optim::OptimizerState>& saved,
                                  const nn::StateDict& saved_model, const std::string& source) {
  std::map<const TensorImpl*, std::string> names;
  for (const auto& [name, p] : module.named_parameters()) names.emplace(p.impl_ptr().get(), name);
  for (size_t o = 0; o < optimizers.size() && o < saved.size(); ++o) {
    const optim::Optimizer& opt = *optimizers[o];
    const nlohmann::json& meta = saved[o].meta;
    if (!meta.is_object() || !meta.contains("param_groups")) continue;
    const nlohmann::json& groups = meta.at("param_groups");
    if (!groups.is_array() || groups.size() != opt.num_param_groups()) continue;
    // Saved ids map to parameters by their position in the group, as load_state_dict maps them.
    std::map<int64_t, std::pair<size_t, size_t>> where_is;
    for (size_t g = 0; g < groups.size(); ++g) {
      const nlohmann::json* ids =
          groups[g].is_object() && groups[g].contains("params") ? &groups[g].at("params") : nullptr;
      if (ids == nullptr || !ids->is_array() || ids->size() != opt.params(g).size()) continue;
      for (size_t k = 0; k < ids->size(); ++k)
        if ((*ids)[k].is_number_integer())
          where_is.emplace((*ids)[k].get<int64_t>(), std::make_pair(g, k));
    }
    for (const auto& [key, t] : saved[o].tensors) {
      const auto parsed = parse_state_key(key);
      if (!parsed || !t.defined()) continue;
      const auto it = where_is.find(parsed->first);
      if (it == where_is.end()) continue;
      const auto [g, k] = it->second;
      const Tensor& p = opt.params(g)[k];
      const auto named = names.find(p.impl_ptr().get());
      const std::string name =
          named != names.end() ? named->second : fmt::format("#{}", parsed->first);
      const bool in_file = named != names.end() && saved_model.contains(name);
      const DType param_dtype = in_file ? saved_model.at(name).dtype() : p.dtype();
      const std::optional<DType> written =
          written_dtype(opt.name(), parsed->second, param_dtype, groups[g], opt.group_options(g));
      if (!written || t.dtype() == *written) continue;
      const DType expected = *written;
      fail("checkpoint",
           "{}: tensor 'optimizer.{}.{}' is stored as {}, but {} keeps the {} of the {} "
           "parameter '{}' in {}: the file is damaged (its header gives the tensor another "
           "dtype than the one it was written in); use an earlier checkpoint",
           source, o, escape_untrusted(key), dtype_text(t.dtype()), opt.name(),
           escape_untrusted(parsed->second), param_dtype.name(), name, dtype_text(expected));
    }
  }
}

}  // namespace mantissa::train
