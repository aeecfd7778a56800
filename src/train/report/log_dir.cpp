// Version directories and the small YAML writer shared by the loggers.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "mantissa/core/error.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/report/logger.h"

namespace mantissa::train {

namespace fs = std::filesystem;

int64_t next_version(const std::string& root_dir, const std::string& name) {
  const fs::path dir = fs::path(root_dir) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int64_t next = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("version_", 0) != 0 || n.size() == 8) continue;
    const std::string digits = n.substr(8);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15) continue;
    next = std::max<int64_t>(next, std::stoll(digits) + 1);
  }
  return next;
}

std::string resolve_log_dir(const std::string& root_dir, const std::string& name, int64_t version) {
  MANTISSA_CHECK(!name.empty(), "Logger", "empty logger name (root_dir '{}')", root_dir);
  const int64_t v = version >= 0 ? version : next_version(root_dir, name);
  const fs::path dir = fs::path(root_dir) / name / ("version_" + std::to_string(v));
  io::prepare_output_dir(dir.string(), "log directory");
  return dir.string();
}

namespace {

// Plain words that YAML 1.1 (PyYAML's safe_load, which Lightning reads hparams.yaml with)
// resolves to a bool or null rather than a string, compared lowercased: the spec's bool regex
// has y/Y/n/N as well as PyYAML's list, and quoting a string that needed no quotes costs nothing.
bool yaml_reserved_word(const std::string& k) {
  std::string lower(k);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* w : {"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
    if (lower == w) return true;
  return false;
}

// A key is written plain only when YAML 1.1 reads it back as the same string; anything else is
// written as a JSON string, which YAML accepts as a double-quoted scalar (as every string value
// is). Unquoted, `yes` and `true` would both become the key True and one value would be lost,
// `1` and `0x10` would become ints. Every YAML 1.1 number, date, .inf/.nan, ~ and the merge key
// starts with a digit, a sign, '.', '~' or '<', so a plain key starts with a letter or '_' and
// holds only letters, digits, '_', '-' and '.', and is not one of the bool/null words.
std::string yaml_key(const std::string& k) {
  const auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  };
  const bool plain = !k.empty() &&
                     (std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_') &&
                     std::all_of(k.begin(), k.end(), word_char) && !yaml_reserved_word(k);
  return plain ? k : io::dump_json(nlohmann::json(k));
}

void emit(std::string& out, const nlohmann::json& v, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if ((x.is_object() || x.is_array()) && !x.empty()) {
        out += pad + yaml_key(k) + ":\n";
        emit(out, x, indent + 2);
      } else {
        out += pad + yaml_key(k) + ": " + io::dump_json(x) + "\n";  // {} and [] are YAML flow style
      }
    }
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if ((x.is_object() || x.is_array()) && !x.empty()) {
        out += pad + "-\n";
        emit(out, x, indent + 2);
      } else {
        out += pad + "- " + io::dump_json(x) + "\n";
      }
    }
  } else {
    out += pad + io::dump_json(v) + "\n";
  }
}

}  // namespace

std::string to_yaml(const nlohmann::json& value) {
  std::string out;
  if (value.is_object() && value.empty()) return "{}\n";
  emit(out, value, 0);
  return out;
}

}  // namespace mantissa::train
