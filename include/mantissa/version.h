#pragma once
namespace mantissa {
// The library version, e.g. "0.1.0" (CMake's PROJECT_VERSION).
const char* version();
// The short git commit the build was configured from, e.g. "a6284e6"; "" when the source was
// not a git checkout. Taken when CMake configures, so rerun cmake to refresh it.
const char* git_revision();
}  // namespace mantissa
