// The --precision of a command that runs only some of the training precisions.
#include "mantissa/recipes/command_precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {

std::string command_precision(const std::string& value, const std::vector<std::string>& accepted,
                              const char* command) {
  const train::PrecisionEntry* e = train::find_precision(value);
  if (e != nullptr && e->implemented &&
      std::find(accepted.begin(), accepted.end(), e->name) != accepted.end())
    return train::normalize_precision(value);
  const std::string valid = fmt::format("{}", fmt::join(accepted, ", "));
  if (e == nullptr) {
    const std::string meant = likely_meant(value, accepted);
    fail(command, "unknown --precision {}{}; {} accepts: {}", quote_untrusted(value, 64),
         meant.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", meant), command,
         valid);
  }
  if (!e->implemented)
    fail(command, "--precision '{}' is recognised but not implemented yet; {} accepts: {}", e->name,
         command, valid);
  fail(command, "--precision {}{} does not apply to {}; use one of: {}", value,
       e->name == value ? std::string() : fmt::format(" (an alias of {})", e->name), command,
       valid);
}

}  // namespace mantissa::recipes
