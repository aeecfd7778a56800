#pragma once
// The comma-separated flags (--precisions, --hidden, --quant-ignore, --fp8-exclude,
// --optim-bits-32) checked in one place: an empty item ("32-true,", ",,", a lone ",", "") is an
// error naming the flag, its value and what its items may be. CLI11's delimiter and the lists'
// parsers dropped empty items without a word, so a stray comma ran fewer precisions, layers or
// exclusions than the user believed were listed.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mantissa::app {

// What a list's items are, for its error: `item` names one ("precision", "layer name") and
// `valid` says what to give ("give precisions separated by commas ...; valid precisions: ..."),
// computed when a value is refused.
struct CommaListItems {
  std::string item;
  std::function<std::string()> valid;
};

// A validator refusing a value with an empty item (spaces around an item do not count as one).
CLI::Validator comma_list(CommaListItems items);

// value's items, split at the commas (after comma_list accepted it).
std::vector<std::string> split_comma_list(const std::string& value);

// An option taking one or more comma-separated values into `items` (bench's and compare's
// --precisions; not CLI11's delimiter, which splits differently); `items` keeps its defaults
// unless given.
CLI::Option* add_comma_list_option(CLI::App& cmd, const std::string& name,
                                   std::vector<std::string>& items, const std::string& description,
                                   CommaListItems what);

// The items of the flags that list precisions, layers, modules and parameters.
CommaListItems precision_items();
CommaListItems hidden_size_items();
CommaListItems layer_name_items();   // --quant-ignore
CommaListItems lora_target_items();  // finetune's --lora-targets
// --fp8-exclude; `examples` such as "net.0,h0", the names the command's models have.
CommaListItems module_name_items(const std::string& examples);
CommaListItems parameter_name_items();  // --optim-bits-32

// --lora-targets takes layer names (peft's target_modules as a list), not a regular expression
// (peft's target_modules as a string, read from an --adapter's adapter_config.json): an item
// with a regular expression's characters (\ ^ $ * + ? ( ) [ ] { } |), which no layer's name
// holds, is refused as that.
CLI::Validator lora_target_names();

}  // namespace mantissa::app
