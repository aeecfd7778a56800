#include "json_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>

#include <nlohmann/json.hpp>

#include "config_help.h"
#include "config_source.h"
#include "flag_value_checks.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::app {
namespace {

// "12", "0.5", "1e-3" as JSON numbers, "true"/"false" as booleans, the rest as strings.
nlohmann::json typed(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  if (!s.empty()) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    const char* last = s.c_str() + s.size();
    // "inf" and "nan" stay strings: JSON has no such numbers (dump() writes null), and casting
    // them to int64 is undefined (x86 gives INT64_MIN: `--gradient-clip-val inf` would be
    // written to config.json as -9223372036854775808).
    if (end == last && std::isfinite(v)) {
      if (s.find_first_of(".eE") == std::string::npos) {
        // Digits are read exactly: through a double, 2^63 + 1 rounded, and a value beyond int64
        // (a uint64 --seed) was cast out of range, which is undefined.
        const char* first = s.c_str() + (s[0] == '+' ? 1 : 0);
        int64_t i = 0;
        if (auto [p, ec] = std::from_chars(first, last, i); ec == std::errc() && p == last)
          return i;
        uint64_t u = 0;
        if (auto [p, ec] = std::from_chars(first, last, u); ec == std::errc() && p == last)
          return u;
        if (v >= -0x1p63 && v < 0x1p63 && v == std::trunc(v)) return static_cast<int64_t>(v);
      }
      return v;
    }
  }
  return s;
}

std::string scalar_text(const nlohmann::json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  // Unsigned first: a value above INT64_MAX (a uint64 --seed) read as int64 came back negative.
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    // A fraction keeps its point: 1.0 is "all batches" to --limit-train-batches, 1 is one batch
    // (fmt writes 1.0 as "1").
    std::string text = fmt::format("{}", v.get<double>());
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
    return text;
  }
  throw CLI::ConversionError(
      fmt::format("config key '{}' must be a string, number, boolean or a list of those", key));
}

}  // namespace

std::string JsonConfig::to_config(const CLI::App* app, bool default_also, bool, std::string) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const CLI::Option* op : app->get_options({})) {
    if (op->get_lnames().empty() || !op->get_configurable()) continue;
    const std::string name = op->get_lnames().front();
    if (name == "help" || name == "config" || name == "version") continue;
    std::vector<std::string> values = op->results();
    if (values.empty()) {
      if (!default_also || op->get_default_str().empty()) continue;
      values = {op->get_default_str()};
    }
    if (op->get_expected_min() == 0) {  // a flag: on unless its last value says false
      const nlohmann::json last = typed(values.back());
      out[name] = op->count() > 0 && last != false && last != 0 && last != -1;
      continue;
    }
    if (values.size() == 1) {
      out[name] = typed(values.front());
    } else {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const auto& v : values) list.push_back(nlohmann::ordered_json(typed(v)));
      out[name] = list;
    }
  }
  return io::dump_json(out, 2) + "\n";
}

namespace {

// A SAX handler that accepts every value and keeps the parser's error, so that a document is
// checked without building it.
class SyntaxCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    error = e.what();
    return false;
  }
  std::optional<std::string> error;
};

// The parser's message when `text` is not JSON, else nullopt.
std::optional<std::string> json_syntax_error(const std::string& text) {
  // A control byte is never in JSON, not even in its strings; the parser would report a NUL as
  // "unexpected end of input", which reads like a truncated file rather than a binary one.
  const auto control = std::find_if(text.begin(), text.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b < 0x20 && b != '\t' && b != '\n' && b != '\r';
  });
  if (control != text.end()) {
    return fmt::format("byte 0x{:02x} at offset {}, which JSON never holds (is it a binary file?)",
                       static_cast<unsigned char>(*control), control - text.begin());
  }
  SyntaxCheck check;
  nlohmann::json::sax_parse(text, &check);
  return check.error;
}

std::vector<std::pair<std::string, std::string>>& values_read() {
  static std::vector<std::pair<std::string, std::string>> values;
  return values;
}

}  // namespace

std::vector<CLI::ConfigItem> JsonConfig::from_config(std::istream& input) const {
  // A chunk past the limit at most: reading all first let a 10 GB file (a checkpoint given by
  // mistake) fill the memory before its size was looked at. A chunk at a time: a buffer of the
  // whole limit would be zeroed for every config, which costs more than parsing a small one.
  std::string text;
  std::array<char, 4096> chunk;
  while (text.size() <= kMaxConfigBytes) {
    input.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (input.gcount() <= 0) break;
    text.append(chunk.data(), static_cast<size_t>(input.gcount()));
  }
  if (text.size() > kMaxConfigBytes) {
    throw CLI::ConversionError(fmt::format(
        "the config file has more than {} bytes, the most a config may have", kMaxConfigBytes));
  }
  nlohmann::json j;
  // A flag set twice ("max-steps" and "max_steps", or one key repeated) is a mistake whichever
  // value wins: collected while parsing, since the parsed object keeps only the last.
  std::vector<std::string> keys, repeated;
  const auto note_key = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& v) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1) {
      std::string flag = v.get<std::string>();
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (std::find(keys.begin(), keys.end(), flag) != keys.end()) repeated.push_back(flag);
      keys.push_back(flag);
    }
    return true;
  };
  // Whether it is JSON at all first, without building anything (the SAX parser keeps its own
  // stack, so depth costs nothing here): a binary file would otherwise be reported as "nesting
  // more than 2 levels deep" (its stray brackets counted), hiding that it is no JSON. Then the
  // depth check, which keeps the recursive DOM below from a hostile nesting.
  if (std::optional<std::string> error = json_syntax_error(text)) {
    throw CLI::ConversionError(
        fmt::format("the config file is not valid JSON: {}", escape_untrusted(*error, 300)));
  }
  if (io::json_nesting_depth(text, /*stop_above=*/2) > 2) {
    // Phrased here, not by io::check_json_nesting, whose "[config] " prefix kept
    // config_error_message from adding the file's name.
    throw CLI::ConversionError(
        "the config file nests arrays/objects more than 2 levels deep; a config is one object "
        "of flags whose values are scalars or lists of scalars");
  }
  try {
    j = nlohmann::json::parse(text, note_key);
  } catch (const nlohmann::json::exception& e) {
    throw CLI::ConversionError(
        fmt::format("the config file is not valid JSON: {}", escape_untrusted(e.what(), 300)));
  }
  if (!repeated.empty()) {
    throw CLI::ConversionError(fmt::format(
        "the config file sets {} more than once (keys may use - or _, but only one of them)",
        escape_untrusted(repeated.front())));
  }
  if (!j.is_object()) {
    throw CLI::ConversionError(
        "the config file must hold one JSON object of flags, e.g. {\"model\": \"cnn\"}");
  }
  std::vector<CLI::ConfigItem> items;
  std::vector<std::string> item_keys;  // as the file writes them ("max_steps")
  std::vector<bool> item_is_list;
  for (const auto& [key, value] : j.items()) {
    if (!key.empty() && key[0] == '-') {
      throw CLI::ConversionError(fmt::format(
          "key '{}': write a flag without its dashes, e.g. \"max-steps\" for --max-steps",
          escape_untrusted(key)));
    }
    item_keys.push_back(key);
    item_is_list.push_back(value.is_array());
    CLI::ConfigItem item;
    if (!section_.empty()) item.parents = {section_};
    item.name = key;
    std::replace(item.name.begin(), item.name.end(), '_', '-');
    if (value.is_array()) {
      for (const auto& v : value) item.inputs.push_back(scalar_text(v, key));
    } else {
      item.inputs.push_back(scalar_text(value, key));
    }
    items.push_back(std::move(item));
  }
  check_values(items, item_keys, item_is_list);
  values_read().clear();
  for (const CLI::ConfigItem& item : items)
    values_read().emplace_back(item.name, item.inputs.empty() ? "" : item.inputs.back());
  return items;
}

void JsonConfig::check_values(const std::vector<CLI::ConfigItem>& items,
                              const std::vector<std::string>& keys,
                              const std::vector<bool>& is_list) const {
  if (root_ == nullptr) return;
  CLI::App* command = root_;
  if (!section_.empty()) {
    try {
      command = root_->get_subcommand(section_);
    } catch (const CLI::OptionNotFound&) {
      return;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    CLI::Option* op = command->get_option_no_throw("--" + items[i].name);
    if (op == nullptr || !op->get_configurable()) continue;  // CLI11 names the unknown key
    const std::string key = escape_untrusted(keys[i]);
    // A switch, given or not: CLI11 took "" and 2.5 as on, a list as a command-line error, and
    // threw std::out_of_range (an internal error) for a number beyond int64.
    if (op->get_expected_min() == 0) {
      if (items[i].inputs.size() != 1) {
        throw CLI::ConversionError(
            fmt::format("key '{}' is a switch: give true or false, not a list", key));
      }
      // The file's switches are JSON's true and false (docs/cli.md), not CLI11's yes/on/2.
      if (items[i].inputs.front() != "true" && items[i].inputs.front() != "false") {
        throw CLI::ConversionError(fmt::format("key '{}' is a switch: give true or false, not '{}'",
                                               key, escape_untrusted(items[i].inputs.front())));
      }
    }
    // A number flag takes a JSON scalar: [1] for "lr" is no number. (A name-list flag such as
    // fp8-exclude takes a JSON list as well as a comma-separated string.)
    if (is_list[i] && is_number_option(*op)) {
      throw CLI::ConversionError(fmt::format("key '{}' takes one number, not a list", key));
    }
    // Options still empty take the file's value, and CLI11 checks it then.
    if (op->empty()) continue;
    for (const std::string& value : items[i].inputs) {
      const std::string error = option_value_error(*op, value);
      if (error.empty()) continue;
      throw CLI::ConversionError(fmt::format(
          "config key '{}': {} (--{} on the command line overrides it, but the file's value must "
          "still be one the flag takes)",
          key, error, items[i].name));
    }
  }
}

const std::vector<std::pair<std::string, std::string>>& config_values_read() {
  return values_read();
}

namespace {

// --config fills train's flags only: `mantissa --config run.json bench` parsed the file into
// train's flags and ran bench without them, without a word, and another command's file was
// refused key by key against train's flags ("train has no flag --block-size") before this was
// said. So before the file is read.
void check_config_command(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) {
    MANTISSA_CHECK(command->get_name() == "train", "command line",
                   "--config is read by `mantissa train` only; give `mantissa {}` its flags on "
                   "the command line",
                   command->get_name());
  }
}

}  // namespace

void add_config_option(CLI::App& app) {
  app.config_formatter(std::make_shared<JsonConfig>("train", &app));
  CLI::Option* config =
      app.set_config("--config", "",
                     "train: read flags from a JSON object {\"flag-name\": value, ...} in FILE (a "
                     "file, a pipe, or - for stdin); flags on the command line win");
  config->type_name("FILE");
  // Listed in `mantissa train --help` too, where a user looks for the command's flags.
  app.get_subcommand("train")->formatter(formatter_listing_config(
      config,
      "Read flags from a JSON object {\"flag-name\": value, ...} in FILE (a file, a pipe, or - for "
      "stdin); flags on the command line win (docs/cli.md)"));
  // Run when CLI11 takes the option's value, once the command line is parsed and before it
  // opens the file: a stream (stdin, a pipe, a FIFO) is read here with a size cap and a timeout
  // and handed on as an in-memory file (a FIFO without a writer blocked CLI11's open forever;
  // /dev/zero never ends).
  config->transform(CLI::Validator(
      [&app](std::string& file) {
        check_config_command(app);
        file = config_source_path(file);
        return std::string();
      },
      "", ""));
  app.allow_config_extras(CLI::config_extras_mode::error);
}

std::optional<std::string> config_error_message(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::Option* config = app.get_option_no_throw("--config");
  // Given twice, --config is the command line's error (as<>() would throw here).
  if (config == nullptr || config->count() != 1) return std::nullopt;
  const std::string file = escape_untrusted(config_display_name(config->results().front()));
  const std::string what = e.what();
  if (dynamic_cast<const CLI::FileError*>(&e) != nullptr)
    return file + ": no such file, or not readable (--config names a JSON file of flags)";
  const std::string extras = "INI was not able to parse ";
  if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr && what.starts_with(extras)) {
    std::string key = what.substr(extras.size());
    if (key.starts_with("train.")) key = key.substr(6);
    std::vector<std::string> flags;
    if (const CLI::App* train = app.get_subcommand_ptr("train").get()) {
      for (const CLI::Option* op : train->get_options({}))
        if (!op->get_lnames().empty()) flags.push_back(op->get_lnames().front());
    }
    if (key == "config") return file + ": a config file cannot name another (key 'config')";
    const std::string hint = likely_meant(key, flags);
    return fmt::format(
        "{}: unknown key '{}': `mantissa train` has no flag --{}{} (`mantissa "
        "train --help` lists them)",
        file, escape_untrusted(key), escape_untrusted(key),
        hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint));
  }
  if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr) return file + ": " + what;
  if (what.starts_with("the config file") || what.starts_with("config key") ||
      what.starts_with("key '"))
    return file + ": " + what;
  return std::nullopt;
}

void write_resolved_config(const CLI::App& cmd, const std::string& path,
                           const std::vector<std::string>& given_only,
                           const std::vector<std::pair<std::string, std::string>>& resolved) {
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(JsonConfig().to_config(&cmd, /*default_also=*/true, false, ""));
  for (const std::string& name : given_only) {
    const CLI::Option* op = cmd.get_option_no_throw("--" + name);
    if (op == nullptr || op->count() == 0) j.erase(name);
  }
  for (const auto& [name, value] : resolved) j[name] = typed(value);
  // Atomically: written in place, a full disk left an empty config.json behind, unreported.
  io::write_text_file_atomically(path, io::dump_json(j, 2) + "\n", "train");
}

}  // namespace mantissa::app
