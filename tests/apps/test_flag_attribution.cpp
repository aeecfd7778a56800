// A library error is put in front of the flag whose value it quotes (apps/flag_attribution.h):
// a long value quoted whole or cut short names its flag, and a path of another flag that only
// starts alike (the same directory) does not.
#include <gtest/gtest.h>

#include <string>

#include "flag_attribution.h"

namespace mantissa::app {
namespace {

// The root app with the subcommand "finetune" given --data and --adapter.
struct Cli {
  CLI::App app{"test"};
  std::string data, adapter;

  Cli(const std::string& data_value, const std::string& adapter_value) {
    CLI::App* cmd = app.add_subcommand("finetune");
    cmd->add_option("--data", data);
    cmd->add_option("--adapter", adapter);
    app.parse(
        std::vector<std::string>{adapter_value, "--adapter", data_value, "--data", "finetune"});
  }
};

const std::string kDir = "/home/someone/projects/fine-tuning/fixtures/";  // 44 bytes

TEST(FlagAttribution, APathInAnotherFlagsDirectoryNamesThatFlag) {
  Cli cli(kDir + "qa.jsonl", kDir + "nope");
  EXPECT_EQ(name_flag_in_error(cli.app, "[adapter] cannot open '" + kDir +
                                            "nope/adapter_config.json' (a peft adapter "
                                            "directory holds adapter_config.json)"),
            "[finetune] --adapter: cannot open '" + kDir +
                "nope/adapter_config.json' (a peft adapter directory holds adapter_config.json)");
  EXPECT_EQ(name_flag_in_error(cli.app, "[data] cannot open '" + kDir + "qa.jsonl'"),
            "[finetune] --data: cannot open '" + kDir + "qa.jsonl'");
}

TEST(FlagAttribution, TwoFlagsGivenOneDirectoryNameTheFlagTheLibrarysTagNames) {
  // generate --model-dir DIR --adapter DIR: both values quote alike; --data comes first.
  Cli cli(kDir + "model", kDir + "model");
  EXPECT_EQ(
      name_flag_in_error(cli.app, "[adapter] cannot open '" + kDir + "model/adapter_config.json'"),
      "[finetune] --adapter: cannot open '" + kDir + "model/adapter_config.json'");
  EXPECT_EQ(name_flag_in_error(cli.app, "[data] cannot open '" + kDir + "model/x.jsonl'"),
            "[finetune] --data: cannot open '" + kDir + "model/x.jsonl'");
}

TEST(FlagAttribution, ADirectoryWithItsTrailingSlashNamesItsFlag) {
  Cli cli(kDir + "qa.jsonl", kDir + "adapter/");
  EXPECT_EQ(name_flag_in_error(cli.app,
                               "[adapter] cannot open '" + kDir + "adapter/adapter_config.json'"),
            "[finetune] --adapter: cannot open '" + kDir + "adapter/adapter_config.json'");
}

TEST(FlagAttribution, AValueQuotedCutShortNamesItsFlag) {
  const std::string data = kDir + std::string(300, 'd') + ".jsonl";
  Cli cli(data, kDir + "adapter");
  // quote_untrusted's cut: the start, then the whole value's length.
  const std::string cut =
      "'" + data.substr(0, 200) + "... (" + std::to_string(data.size()) + " bytes)'";
  EXPECT_EQ(name_flag_in_error(cli.app, "[data] " + cut + " is empty"),
            "[finetune] --data: " + cut + " is empty");
  // Another file of that directory, cut short too, is not --data's.
  const std::string other = kDir + std::string(300, 'o');
  const std::string other_cut =
      "'" + other.substr(0, 200) + "... (" + std::to_string(other.size()) + " bytes)'";
  EXPECT_EQ(name_flag_in_error(cli.app, "[data] " + other_cut + " is empty"),
            "[data] " + other_cut + " is empty");
}

}  // namespace
}  // namespace mantissa::app
