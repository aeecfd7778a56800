#include "repeated_switches.h"

namespace mantissa::app {

void refuse_repeated_switches(CLI::App& app) {
  for (CLI::Option* op : app.get_options()) {
    const bool is_switch = op->get_expected_max() == 0;
    const bool help_or_version =
        op == app.get_help_ptr() || op == app.get_help_all_ptr() || op->check_lname("version");
    if (is_switch && !help_or_version) op->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_repeated_switches(*sub);
}

}  // namespace mantissa::app
