#pragma once
// The --precision of a command that runs only some of the training precisions (generate,
// finetune): refused in one error listing just those, before any alias warning.
#include <string>
#include <vector>

namespace mantissa::recipes {

// The canonical name of `value` (train::normalize_precision, alias warning included) when it is
// one of `accepted` (canonical names); otherwise throws, under `command`'s name, listing only
// `accepted`: an unknown value (with its likely meaning), a planned one, or a name or alias of a
// precision the command does not run (naming the precision an alias stands for).
std::string command_precision(const std::string& value, const std::vector<std::string>& accepted,
                              const char* command);

}  // namespace mantissa::recipes
