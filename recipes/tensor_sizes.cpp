#include "mantissa/recipes/tensor_sizes.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

namespace mantissa::recipes {
namespace {

// Names come from the file: parsed by hand, not with std::regex, whose recursion a hostile
// name thousands of characters long could overflow.

bool is_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The '.'-separated parts of a name.
std::vector<std::string_view> parts_of(std::string_view name) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// The dimension `dim` of the 2-d tensor named `last` (its final parts, after any prefix).
std::optional<int64_t> dim_of(const TensorShapes& shapes, std::string_view last, size_t dim) {
  for (const auto& [name, shape] : shapes) {
    const bool named =
        name == last || (name.ends_with(last) && name[name.size() - last.size() - 1] == '.');
    if (named && shape.size() == 2) return shape[dim];
  }
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> mlp_layer_outputs(const TensorShapes& shapes) {
  std::map<int64_t, int64_t> by_layer;  // layer index -> outputs, in index order
  for (const auto& [name, shape] : shapes) {
    if (shape.size() != 1) continue;
    const std::vector<std::string_view> p = parts_of(name);
    // ... "net", "<k>", ["base_layer",] "bias"
    const size_t n = p.size();
    if (n < 3 || p[n - 1] != "bias") continue;
    const size_t k = p[n - 2] == "base_layer" ? n - 3 : n - 2;
    if (k < 1 || p[k - 1] != "net" || !is_index(p[k])) continue;
    by_layer[std::stoll(std::string(p[k]))] = shape[0];
  }
  std::vector<int64_t> out;
  for (const auto& [layer, outputs] : by_layer) out.push_back(outputs);
  return out;
}

GptSizes gpt_sizes(const TensorShapes& shapes) {
  GptSizes s;
  s.width = dim_of(shapes, "wte.weight", 1);
  s.context = dim_of(shapes, "wpe.weight", 0);
  std::set<std::string> blocks;  // "h0", "h1", ...
  for (const auto& [name, shape] : shapes) {
    for (std::string_view part : parts_of(name)) {
      if (part.size() > 1 && part[0] == 'h' && is_index(part.substr(1))) {
        blocks.emplace(part);
        break;
      }
    }
  }
  if (!blocks.empty()) s.layers = static_cast<int64_t>(blocks.size());
  return s;
}

std::optional<LoraRankInFile> lora_rank_in_file(const TensorShapes& shapes) {
  for (const auto& [name, shape] : shapes) {
    if (name.ends_with(".lora_A.weight") && shape.size() == 2)
      return LoraRankInFile{name, shape[0]};
  }
  return std::nullopt;
}

std::optional<int64_t> fp8_amax_history_rows(const TensorShapes& shapes) {
  for (const auto& [name, shape] : shapes) {
    if (name.ends_with(".fp8_amax_history") && shape.size() == 2) return shape[0];
  }
  return std::nullopt;
}

std::string fp8_state_within(const TensorShapes& shapes, const std::string& name) {
  // A Trainer checkpoint's model tensors are "model.<name>" (its optimizer's are not the
  // model's); a --save-weights file's names are the model's as they are.
  const bool prefixed = std::any_of(shapes.begin(), shapes.end(),
                                    [](const auto& s) { return s.first.starts_with("model."); });
  if (name.empty()) return "";
  for (const auto& [full, shape] : shapes) {
    if (prefixed && !full.starts_with("model.")) continue;
    const std::string_view tensor = std::string_view(full).substr(prefixed ? 6 : 0);
    if (tensor.size() <= name.size() || !tensor.starts_with(name) || tensor[name.size()] != '.')
      continue;
    if (tensor.ends_with(".fp8_scale") || tensor.ends_with(".fp8_amax_history")) return full;
  }
  return "";
}

}  // namespace mantissa::recipes
