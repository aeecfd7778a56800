#pragma once
// `mantissa train --config run.json`: every command-line flag as a key of one JSON object
// ({"model": "cnn", "max-steps": 200, "early_stopping_monitor": "val_loss", "quiet": true}),
// read through CLI11's config mechanism, so flags given on the command line win over the file
// and an unknown key is an error naming it. Underscores in keys count as dashes (Lightning's
// spelling). The resolved configuration (every flag's final value) is written in the same
// format next to the checkpoints, as LightningCLI does.
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mantissa::app {

class JsonConfig : public CLI::Config {
 public:
  // Keys become flags of the subcommand `section` ("train") of `root`. With `root`, a switch's
  // value must be a truth value, and a key whose flag the command line gives (and so overrides)
  // is still checked: its value must be one the flag takes, or the file is refused naming the
  // key.
  explicit JsonConfig(std::string section = "", CLI::App* root = nullptr)
      : section_(std::move(section)), root_(root) {}
  // A flat JSON object of the app's options; values set (default_also: defaults too).
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  // Throws CLI::ConversionError with what is wrong (not an object, a nested value, too deep).
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  // Throws CLI::ConversionError naming the key (`keys`, as the file writes them) when a switch's
  // item is not true or false, when a number flag is given a list (`is_list`, per item),
  // or when an item the command line overrides holds a value its flag would refuse.
  void check_values(const std::vector<CLI::ConfigItem>& items, const std::vector<std::string>& keys,
                    const std::vector<bool>& is_list) const;

  std::string section_;
  CLI::App* root_ = nullptr;
};

// The keys (dashed) and values (as text; a list's last) of the config file read last, so that
// an error CLI11 raises without naming the key (a switch given "maybe") can name it.
const std::vector<std::pair<std::string, std::string>>& config_values_read();

// Installs --config on the main app for the `train` subcommand; unknown keys are errors.
void add_config_option(CLI::App& app);

// The message for a parse error that comes from the --config file (an unknown key, a key that
// may not be set there, a file that is not a JSON object of flags), naming the file; nullopt
// for any other error, which CLI11 reports as usual.
std::optional<std::string> config_error_message(const CLI::App& app, const CLI::ParseError& e);

// Writes cmd's resolved configuration to `path` (atomically enough for a small file: the
// whole text at once): every flag given, and every other flag's default except those named in
// `given_only` (flags whose default means something else for this run, or that do not apply to
// it: the GPT's --batch-size default is not the image models', --hidden means nothing to it);
// `resolved` then sets keys to the values the run actually used. Throws mantissa::Error when it
// cannot.
void write_resolved_config(const CLI::App& cmd, const std::string& path,
                           const std::vector<std::string>& given_only = {},
                           const std::vector<std::pair<std::string, std::string>>& resolved = {});

}  // namespace mantissa::app
