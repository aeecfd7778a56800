#include "fp8_options.h"

#include <CLI/CLI.hpp>

#include "mantissa/core/error.h"
#include "mantissa/train/transformer_engine_precision.h"

namespace mantissa::app {

void add_fp8_options(CLI::App* cmd, PrecisionSettings* settings) {
  auto flag = [&](const char* name, const char* key, const char* help) {
    cmd->add_option_function<std::string>(
           name, [settings, key](const std::string& v) { (*settings)[key] = v; }, help)
        // A bad value is refused while the command line is parsed, naming the flag, by the
        // plugin's own parser and recipe checks (the plugin's message names its setting key).
        ->check(CLI::Validator(
            [key](const std::string& v) -> std::string {
              try {
                train::transformer_engine_options_from({{key, v}});
              } catch (const Error& e) {
                return e.what();
              }
              return "";
            },
            "", ""));
  };
  flag("--fp8-format", "fp8_format",
       "transformer-engine: E4M3 or HYBRID (E4M3 forward, E5M2 gradients; default)");
  flag("--fp8-amax-history-len", "fp8_amax_history_len",
       "transformer-engine: steps of amax history per tensor (default 1024)");
  flag("--fp8-amax-compute-algo", "fp8_amax_compute_algo",
       "transformer-engine: max (default) or most_recent");
  flag("--fp8-margin", "fp8_margin", "transformer-engine: scales are divided by 2^margin");
  flag("--fp8-exclude", "fp8_exclude",
       "transformer-engine: module names kept out of FP8 with everything inside them, comma "
       "separated (e.g. head, h0)");
}

}  // namespace mantissa::app
