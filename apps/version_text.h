#pragma once
#include <string>

namespace mantissa::app {

// What `mantissa --version` prints: "mantissa 0.1.0 (git a6284e6)", without the commit when
// the build was not configured from a git checkout.
std::string version_text();

}  // namespace mantissa::app
