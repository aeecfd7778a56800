// Messages for command lines CLI11 could not take (command_line_errors.h).
#include "command_line_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

#include "config_source.h"
#include "json_config.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::app {
namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// The long option names ("--model") of a command and of the root (--config, --version).
std::vector<std::string> option_names(const CLI::App& app, const CLI::App& root) {
  std::vector<std::string> names;
  for (const CLI::App* a : {&app, &root})
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    }
  return names;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& names) {
  const std::string meant = likely_meant(given, names);
  return meant.empty() ? "" : fmt::format(" (did you mean {}?)", meant);
}

// Why the main app's option `given` ("--config") is unknown to `command`, or "" when it is no
// such option. It matched itself as the likely meant name: "unknown option --config (did you
// mean --config?)".
std::string main_option_hint(const std::string& given, const CLI::App& root) {
  // Lightning's Trainer(num_nodes=...): here the nodes are mpirun's to start.
  if (given == "--num-nodes" || given == "--num_nodes") {
    return " (a job over several machines is started with `mpirun --hostfile FILE -np N "
           "mantissa train ...`, its ranks counted over all machines; docs/distributed.md)";
  }
  const CLI::Option* opt = root.get_option_no_throw(given);
  if (opt == nullptr) return "";
  if (opt == root.get_config_ptr()) return " (only `mantissa train` reads a --config file)";
  return fmt::format(" (it belongs before the command: `mantissa {}`)", given);
}

// An unknown command or option, a stray word, or no command: the message, else nullopt.
std::optional<std::string> unknown_arguments_message(const CLI::App& app,
                                                     const CLI::ParseError& e) {
  const std::vector<std::string> commands = command_names(app);
  const std::string command_list = fmt::format("{}", fmt::join(commands, ", "));
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) {
    // No command recognised: the first word given, if any, was meant as one.
    const std::vector<std::string> rest = app.remaining();
    if (dynamic_cast<const CLI::RequiredError*>(&e) == nullptr &&
        dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr)
      return std::nullopt;
    if (rest.empty())
      return fmt::format("a command is required: one of {} (see --help)", command_list);
    const std::string& word = rest.front();
    if (!word.empty() && word[0] == '-')
      return fmt::format("unknown option {} before the command{}; commands: {} (see --help)", word,
                         did_you_mean(word, option_names(app, app)), command_list);
    return fmt::format("unknown command '{}'{}; commands: {} (see --help)", word,
                       did_you_mean(word, commands), command_list);
  }
  const bool missing = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  if (!missing && dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) return std::nullopt;
  const CLI::App& command = *parsed.front();
  const std::vector<std::string> names = option_names(command, app);
  std::vector<std::string> unknown, stray;
  bool after_unknown_option = false;
  // The whole line's leftovers: a command whose options fall through to the root (train's do,
  // for --config) leaves its unknown words with the root.
  for (const std::string& arg : app.remaining(true)) {
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      const std::string hint = main_option_hint(name, app);
      unknown.push_back(name + (hint.empty() ? did_you_mean(name, names) : hint));
      after_unknown_option = arg.find('=') == std::string::npos;
    } else if (after_unknown_option) {
      after_unknown_option = false;  // most likely the unknown option's value
    } else {
      stray.push_back("'" + arg + "'");
    }
  }
  std::vector<std::string> parts;
  if (missing) parts.push_back(e.what());  // "--checkpoint is required"
  if (!unknown.empty())
    parts.push_back(fmt::format("unknown option{} {}", unknown.size() > 1 ? "s" : "",
                                fmt::join(unknown, ", ")));
  if (!stray.empty())
    parts.push_back(
        fmt::format("unexpected argument{} {} (every value follows its flag, e.g. "
                    "--model mlp)",
                    stray.size() > 1 ? "s" : "", fmt::join(stray, ", ")));
  if (parts.empty()) return std::nullopt;
  return fmt::format("{}; `mantissa {} --help` lists the options", fmt::join(parts, "; "),
                     command.get_name());
}

// The flag a CLI11 message is about: its first "--name" ("Could not convert: --epochs = two",
// "--hidden: At Most 1 required but received 2"), or "".
std::string flag_of(const std::string& what) {
  const size_t at = what.find("--");
  if (at == std::string::npos) return "";
  size_t end = at + 2;
  while (end < what.size() && (std::isalnum(static_cast<unsigned char>(what[end])) ||
                               what[end] == '-' || what[end] == '_'))
    ++end;
  return what.substr(at, end - at);
}

// The --config file's name when one was given (once), else "".
std::string config_file(const CLI::App& app) {
  const CLI::Option* config = app.get_option_no_throw("--config");
  if (config == nullptr || config->count() != 1) return "";
  return escape_untrusted(config_display_name(config->results().front()));
}

// The option `flag` ("--lr") of the command given, or of the root; null when neither has it.
const CLI::Option* find_option(const CLI::App& app, const std::string& flag) {
  for (const CLI::App* sub : app.get_subcommands())
    if (const CLI::Option* op = sub->get_option_no_throw(flag)) return op;
  return app.get_option_no_throw(flag);
}

// CLI11's "Could not convert: --lr = abc" in mantissa's words: the flag, the value and what the
// flag takes, from the option's type ("--lr: 'abc' is not a number (expected a number such as
// 0.001, the default)"); `what` itself for an option it cannot name.
std::string reworded_conversion(const CLI::App& app, const std::string& what,
                                const std::string& flag) {
  const CLI::Option* op = flag.empty() ? nullptr : find_option(app, flag);
  if (op == nullptr || what.rfind("Could not convert: ", 0) != 0) return what;
  const std::string value = escape_untrusted(fmt::format("{}", fmt::join(op->results(), ",")));
  const std::string type = op->get_type_name();
  const std::string fallback = type.rfind("FLOAT", 0) == 0 ? "1.5" : "2";
  const std::string example =
      op->get_default_str().empty()
          ? fallback
          : fmt::format("{}, the default", escape_untrusted(op->get_default_str()));
  if (type.rfind("FLOAT", 0) == 0)
    return fmt::format("{}: '{}' is not a number (expected a number such as {})", flag, value,
                       example);
  if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) {
    const bool unsigned_type = type.rfind("UINT", 0) == 0;
    if (unsigned_type && is_whole_number(value) && value[0] == '-')
      return fmt::format("{}: '{}' is negative (expected a whole number of 0 or more, such as {})",
                         flag, value, example);
    if (is_whole_number(value))
      return fmt::format("{}: '{}' is out of range (expected a whole number such as {})", flag,
                         value, example);
    return fmt::format("{}: '{}' is not an integer (expected a whole number such as {})", flag,
                       value, example);
  }
  // A switch (its value from a --config file): the words it takes. Any other option without a
  // type name: its description, which says what it takes.
  if (op->get_expected_min() == 0)
    return fmt::format("{}: '{}' is no truth value (a switch takes true or false)", flag, value);
  return fmt::format("{}: '{}' is not a valid value (expected {})", flag, value,
                     type.empty() ? op->get_description() : type);
}

// CLI11's wording for a flag given too many or too few values, in mantissa's.
std::string reworded_mismatch(const std::string& what, const std::string& flag, bool in_config) {
  const std::string most = "At Most 1 required but received ";
  if (const size_t at = what.find(most); at != std::string::npos) {
    const std::string n = what.substr(at + most.size());
    return in_config ? fmt::format("{} takes one value, the file gives a list of {}", flag, n)
                     : fmt::format("{} was given {} times; give it once", flag, n);
  }
  if (what.find("required") != std::string::npos && what.find("missing") != std::string::npos)
    return fmt::format("{} needs a value ({})", flag, what.substr(what.find(':') + 2));
  return what;
}

// The name of `flag`'s option that `args` gives ("--memory-limit" for plan's
// "--memory,--memory-limit", whose messages CLI11 words with its first name), else `flag`.
std::string name_as_typed(const CLI::App& app, const std::string& flag,
                          const std::vector<std::string>& args) {
  const CLI::Option* op = flag.empty() ? nullptr : find_option(app, flag);
  if (op == nullptr) return flag;
  for (const std::string& l : op->get_lnames())
    if (given_on_command_line("--" + l, args)) return "--" + l;
  return flag;
}

// `text` with the flag name `from` replaced by `to` where it stands alone ("--memory" but not
// the "--memory" of "--memory-limit").
std::string with_flag_renamed(std::string text, const std::string& from, const std::string& to) {
  if (from == to || from.empty()) return text;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    const size_t end = at + from.size();
    const bool whole =
        end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) ||
                                text[end] == '-' || text[end] == '_');
    if (whole) {
      text.replace(at, from.size(), to);
      at += to.size();
    } else {
      at = end;
    }
  }
  return text;
}

}  // namespace

bool given_on_command_line(const std::string& flag, const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

std::optional<CommandLineError> parse_error_message(const CLI::App& app, const CLI::ParseError& e,
                                                    const std::vector<std::string>& args) {
  if (e.get_exit_code() == 0) return std::nullopt;  // --help, --version
  if (const std::optional<std::string> m = config_error_message(app, e))
    return CommandLineError{"config", *m};
  const std::string what = e.what();
  const bool bad_value = dynamic_cast<const CLI::ConversionError*>(&e) != nullptr ||
                         dynamic_cast<const CLI::ValidationError*>(&e) != nullptr;
  const bool mismatch = dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr;
  if (bad_value || mismatch) {
    // A value from the --config file (its flag not on the command line) is the file's error.
    const std::string flag = flag_of(what);
    const std::string file = config_file(app);
    const bool in_config = !file.empty() && !flag.empty() && !given_on_command_line(flag, args);
    const std::string text =
        with_flag_renamed(mismatch ? reworded_mismatch(what, flag, in_config)
                          : dynamic_cast<const CLI::ConversionError*>(&e) != nullptr
                              ? reworded_conversion(app, what, flag)
                              : what,
                          flag, name_as_typed(app, flag, args));
    if (in_config) return CommandLineError{"config", fmt::format("{}: {}", file, text)};
    return CommandLineError{"command line", text + " (see --help)"};
  }
  if (const std::optional<std::string> m = unknown_arguments_message(app, e))
    return CommandLineError{"command line", *m};
  return CommandLineError{"command line", what + " (see --help)"};
}

bool is_truth_value(const std::string& v) {
  static const char* const kWords[] = {"true", "false",  "on",      "off", "yes",
                                       "no",   "enable", "disable", "+",   "-"};
  if (std::find(std::begin(kWords), std::end(kWords), v) != std::end(kWords)) return true;
  // A number CLI11's stoll takes (one beyond int64 threw std::out_of_range).
  int64_t n = 0;
  const char* first = v.data() + (!v.empty() && v[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, v.data() + v.size(), n);
  return is_whole_number(v) && ec == std::errc() && end == v.data() + v.size();
}

std::optional<CommandLineError> switch_with_other_value(const CLI::App& app,
                                                        const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;  // what follows is no flag
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    const std::string flag = a.substr(0, eq);
    const std::string value = a.substr(eq + 1);
    if (value == "true" || value == "false") continue;
    // Every command's (before parsing, get_subcommands() without a filter lists none).
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      const CLI::Option* op = sub->get_option_no_throw(flag);
      if (op != nullptr && op->get_expected_min() == 0) {
        return CommandLineError{
            "command line",
            fmt::format("{} is a switch: give it alone, or ={{true,false}}, not '{}'", flag,
                        escape_untrusted(value))};
      }
    }
  }
  return std::nullopt;
}

CommandLineError switch_value_message(const CLI::App& app, const std::vector<std::string>& args) {
  if (auto error = switch_with_other_value(app, args)) return *error;
  const std::string file = config_file(app);
  if (!file.empty()) {
    // The file's switch whose value is no truth value, by its key.
    for (const auto& [key, value] : config_values_read()) {
      for (const CLI::App* sub : app.get_subcommands()) {
        const CLI::Option* op = sub->get_option_no_throw("--" + key);
        if (op == nullptr || op->get_expected_min() != 0 || is_truth_value(value)) continue;
        return {"config", fmt::format("{}: key '{}' is a switch: give true or false, not '{}'",
                                      file, escape_untrusted(key), escape_untrusted(value))};
      }
    }
    return {"config", fmt::format("{}: a switch takes true or false", file)};
  }
  return {"command line", "a switch takes true or false as its value (see --help)"};
}

bool is_whole_number(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

}  // namespace mantissa::app
