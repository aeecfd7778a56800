#include "optimizer_options.h"

#include "comma_list.h"

namespace mantissa::app {

void add_optimizer_options(CLI::App& cmd, std::string& optimizer, std::string& optim_bits_32) {
  cmd.add_option("--optimizer", optimizer,
                 "adamw, adam, sgd (momentum 0.9), adamw8bit or adam8bit (8-bit blockwise "
                 "state, docs/optimizers.md)")
      ->capture_default_str();
  cmd.add_option("--optim-bits-32", optim_bits_32,
                 "8-bit optimizers: parameters whose name contains one of these "
                 "comma-separated strings keep 32-bit state (names as in the model summary, e.g. "
                 "net.0.weight, h0.mlp)")
      // An empty list ("", an unset shell variable) or item names no parameter: refused, since
      // dropping it would keep 8-bit state everywhere while the user believes some has 32-bit
      // state.
      ->check(comma_list(parameter_name_items()));
}

}  // namespace mantissa::app
