#include "optimizer_options.h"

#include <fmt/format.h>

#include "mantissa/core/untrusted_text.h"

namespace mantissa::app {
namespace {

// An empty list ("", an unset shell variable) or an empty item (",", "net.0,") names no
// parameter: it used to be dropped without a word, so the run kept 8-bit state everywhere while
// the user believed some parameters had 32-bit state.
CLI::Validator parameter_name_list() {
  return CLI::Validator(
      [](std::string& value) {
        bool empty_item = value.empty() || value.front() == ',' || value.back() == ',' ||
                          value.find(",,") != std::string::npos;
        if (!empty_item) return std::string();
        return fmt::format(
            "{} has an empty parameter name; give comma-separated (parts of) parameter names "
            "as the model summary shows them, such as net.0.weight,h0.mlp",
            quote_untrusted(value, 200));
      },
      "NAME,...");
}

}  // namespace

void add_optimizer_options(CLI::App& cmd, std::string& optimizer, std::string& optim_bits_32) {
  cmd.add_option("--optimizer", optimizer,
                 "adamw, adam, sgd (momentum 0.9), adamw8bit or adam8bit (8-bit blockwise "
                 "state, docs/optimizers.md)")
      ->capture_default_str();
  cmd.add_option("--optim-bits-32", optim_bits_32,
                 "8-bit optimizers: parameters whose name contains one of these "
                 "comma-separated strings keep 32-bit state (names as in the model summary, e.g. "
                 "net.0.weight, h0.mlp)")
      ->check(parameter_name_list());
}

}  // namespace mantissa::app
