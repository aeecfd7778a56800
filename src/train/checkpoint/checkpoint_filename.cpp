#include "train/checkpoint/checkpoint_filename.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <type_traits>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::train {
namespace {

// A template is literal text and "{key}" / "{key:spec}" fields, in order.
struct Piece {
  bool field = false;
  std::string text;  // the literal text, or the field's key
  std::string spec;  // the field's format spec ("" for none)
};

std::vector<Piece> parse(const std::string& filename) {
  std::vector<Piece> pieces;
  size_t pos = 0;
  while (pos < filename.size()) {
    const size_t open = filename.find_first_of("{}", pos);
    if (open == std::string::npos || filename[open] == '}') {
      MANTISSA_CHECK(open == std::string::npos, "ModelCheckpoint",
                     "filename '{}' has a '}}' without its '{{' at character {}", filename,
                     open + 1);
      pieces.push_back({.text = filename.substr(pos), .spec = ""});
      break;
    }
    if (open > pos) pieces.push_back({.text = filename.substr(pos, open - pos), .spec = ""});
    const size_t close = filename.find_first_of("{}", open + 1);
    MANTISSA_CHECK(close != std::string::npos && filename[close] == '}', "ModelCheckpoint",
                   "filename '{}' has a '{{' without its '}}' at character {}", filename, open + 1);
    const std::string inside = filename.substr(open + 1, close - open - 1);
    const size_t colon = inside.find(':');
    Piece field{.field = true, .text = inside.substr(0, colon), .spec = ""};
    if (colon != std::string::npos) field.spec = inside.substr(colon + 1);
    MANTISSA_CHECK(!field.text.empty(), "ModelCheckpoint",
                   "filename '{}' has a field without a key at character {}: write {{epoch}}, "
                   "{{step}} or {{<logged metric>}}",
                   filename, open + 1);
    pieces.push_back(std::move(field));
    pos = close + 1;
  }
  return pieces;
}

bool is_counter(const std::string& key) { return key == "epoch" || key == "step"; }

// epoch and step are integers; metrics are floats, 4 decimals without a spec (the values
// ModelCheckpoint has always written).
template <typename T>
std::string format_value(const std::string& filename, const Piece& field, T value) {
  if (field.spec.empty()) {
    if constexpr (std::is_integral_v<T>)
      return std::to_string(value);
    else
      return fmt::format("{:.4f}", value);
  }
  try {
    return fmt::format(fmt::runtime("{:" + field.spec + "}"), value);
  } catch (const fmt::format_error& e) {
    fail("ModelCheckpoint", "filename '{}': the format spec '{}' of '{}' does not fit {} ({})",
         filename, field.spec, field.text,
         std::is_integral_v<T> ? "an integer" : "a floating-point metric", e.what());
  }
}

}  // namespace

void check_checkpoint_filename(const std::string& filename) {
  for (const Piece& p : parse(filename)) {
    if (!p.field) continue;
    if (is_counter(p.text))
      format_value(filename, p, int64_t{0});
    else
      format_value(filename, p, 0.0);
  }
}

std::string format_checkpoint_filename(const std::string& filename, int64_t epoch, int64_t step,
                                       const std::map<std::string, double>& metrics) {
  std::string name;
  for (const Piece& p : parse(filename)) {
    if (!p.field) {
      name += p.text;
      continue;
    }
    std::string value;
    if (is_counter(p.text)) {
      value = format_value(filename, p, p.text == "epoch" ? epoch : step);
    } else if (auto it = metrics.find(p.text); it != metrics.end()) {
      value = format_value(filename, p, it->second);
    } else {
      std::vector<std::string> keys = {"epoch", "step"};
      for (const auto& kv : metrics) keys.push_back(kv.first);
      fail("ModelCheckpoint",
           "filename '{}' names the key '{}', which is neither epoch, step nor a logged metric; "
           "the keys are: {}. Log it with log('{}', value) in the TrainModule, or fix the "
           "filename",
           filename, p.text, fmt::join(keys, ", "), p.text);
    }
    name += p.text + "=" + value;
  }
  return name;
}

std::string versioned_checkpoint_filename(const std::string& name, int64_t version) {
  return fmt::format("{}-v{}", name, version);
}

}  // namespace mantissa::train
