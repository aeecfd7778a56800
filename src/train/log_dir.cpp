// Version directories and the small YAML writer shared by the loggers.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "mantissa/core/error.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/logger.h"

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

// A key that YAML reads back as the same plain string needs no quotes; anything else is written
// as a JSON string, which YAML accepts as a double-quoted scalar.
std::string yaml_key(const std::string& k) {
  const bool plain = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
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
