#include "mantissa/version.h"

// CMake defines MANTISSA_VERSION; the build writes MANTISSA_GIT_REVISION into this header at
// every build (cmake/git_revision.cmake), so only this file recompiles on a new commit.
#include "mantissa_git_revision.h"

namespace mantissa {
const char* version() { return MANTISSA_VERSION; }
const char* git_revision() { return MANTISSA_GIT_REVISION; }
}  // namespace mantissa
