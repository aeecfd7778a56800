#include "untimed_steps_option.h"

#include <fmt/format.h>

#include "mantissa/core/warning.h"

namespace mantissa::app {

CLI::Option* add_untimed_steps_option(CLI::App& cmd, int64_t* steps, const std::string& help) {
  CLI::Option* untimed = cmd.add_option("--untimed-steps", *steps, help)->capture_default_str();
  return cmd
      .add_option("--warmup-steps", *steps,
                  "Deprecated name of --untimed-steps (not a learning-rate warm-up); it will be "
                  "removed in the next release")
      ->excludes(untimed);
}

std::string deprecated_untimed_steps_alias_warning(const std::string& command) {
  return fmt::format(
      "--warmup-steps is deprecated in `mantissa {}`: use --untimed-steps (the same untimed "
      "steps before each timed run; --warmup-steps means the learning-rate warm-up in `mantissa "
      "train --model gpt`); the old name will be removed in the next release",
      command);
}

void warn_deprecated_untimed_steps_alias(const CLI::Option* alias, const std::string& command) {
  if (alias->count() > 0) warn(deprecated_untimed_steps_alias_warning(command));
}

}  // namespace mantissa::app
