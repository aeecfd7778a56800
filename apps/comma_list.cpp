#include "comma_list.h"

#include <fmt/format.h>

#include <utility>

#include "mantissa/core/untrusted_text.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::app {
namespace {

bool is_blank(const std::string& item) {
  return item.find_first_not_of(" \t") == std::string::npos;
}

// "" when every item of `value` holds something, else why not.
std::string empty_item_error(const std::string& value, const CommaListItems& what) {
  for (const std::string& item : split_comma_list(value)) {
    if (!is_blank(item)) continue;
    return fmt::format(
        "{} has an empty {} (an empty value, or a comma at the start, at the end or doubled); {}",
        quote_untrusted(value, 200), what.item, what.valid());
  }
  return "";
}

}  // namespace

CLI::Validator comma_list(CommaListItems items) {
  return CLI::Validator(
      [what = std::move(items)](std::string& value) { return empty_item_error(value, what); }, "",
      "");
}

std::vector<std::string> split_comma_list(const std::string& value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    out.push_back(value.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

CLI::Option* add_comma_list_option(CLI::App& cmd, const std::string& name,
                                   std::vector<std::string>& items, const std::string& description,
                                   CommaListItems what) {
  const std::string defaults = fmt::format("{}", fmt::join(items, ","));
  return cmd
      .add_option_function<std::vector<std::string>>(
          name,
          [&items](const std::vector<std::string>& values) {
            items.clear();
            for (const std::string& value : values)
              for (const std::string& item : split_comma_list(value)) items.push_back(item);
          },
          description)
      ->check(comma_list(std::move(what)))
      ->default_str(defaults);
}

CommaListItems precision_items() {
  return {"precision", [] {
            return "give precisions separated by commas (32-true,bf16-mixed); valid precisions: " +
                   train::supported_precisions_text();
          }};
}

CommaListItems hidden_size_items() {
  return {"size", [] {
            return std::string(
                "give positive integers separated by commas, such as 512,256 (an MLP "
                "784-512-256-10)");
          }};
}

CommaListItems layer_name_items() {
  return {"layer name", [] {
            return std::string(
                "give name prefixes of Linear layers separated by commas, as the model summary "
                "shows them, such as net.0,h0.mlp");
          }};
}

CommaListItems lora_target_items() {
  return {"layer name", [] {
            return std::string(
                "give names of Linear layers separated by commas (peft's target_modules), such "
                "as q_proj,v_proj, or leave --lora-targets out to adapt every Linear layer");
          }};
}

CLI::Validator lora_target_names() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        for (const std::string& item : split_comma_list(value)) {
          if (item.find_first_of("\\^$*+?()[]{}|") == std::string::npos) continue;
          return fmt::format(
              "{} is a regular expression, not a layer name: --lora-targets takes names of "
              "Linear layers separated by commas, each matching a layer's whole name or its "
              "last dotted parts (peft's target_modules as a list), such as q_proj,v_proj; a "
              "regular expression (target_modules as a string) is read from the "
              "adapter_config.json of an --adapter directory",
              quote_untrusted(item, 200));
        }
        return "";
      },
      "", "");
}

CommaListItems module_name_items(const std::string& examples) {
  return {"module name", [examples] {
            return "give module names separated by commas, as the model summary shows them, "
                   "such as " +
                   examples;
          }};
}

CommaListItems parameter_name_items() {
  return {"parameter name", [] {
            return std::string(
                "give (parts of) parameter names separated by commas, as the model summary shows "
                "them, such as net.0.weight,h0.mlp");
          }};
}

}  // namespace mantissa::app
