#pragma once
// User-facing warnings: one line on stderr, "mantissa: warning: <message>".
#include <string>

namespace mantissa {

void warn(const std::string& message);

// The same, at most once per process for each distinct message: commands that run many
// trainings in one process (compare, bench) say a thing once, not once per run.
void warn_once(const std::string& message);

// Forgets which messages warn_once has said, so that each may be said once more. For tests:
// their order would otherwise decide which of them sees a once-a-process warning.
void forget_warnings_said_once();

}  // namespace mantissa
