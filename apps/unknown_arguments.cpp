// Messages for command lines CLI11 could not place (unknown_arguments.h).
#include "unknown_arguments.h"

#include <fmt/format.h>

#include <vector>

#include "mantissa/core/closest_names.h"

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

}  // namespace

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
    if (rest.empty()) return fmt::format("a command is required: one of {} (see --help)", command_list);
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
      unknown.push_back(name + did_you_mean(name, names));
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
    parts.push_back(fmt::format("unexpected argument{} {} (every value follows its flag, e.g. "
                                "--model mlp)",
                                stray.size() > 1 ? "s" : "", fmt::join(stray, ", ")));
  if (parts.empty()) return std::nullopt;
  return fmt::format("{}; `mantissa {} --help` lists the options", fmt::join(parts, "; "),
                     command.get_name());
}

}  // namespace mantissa::app
