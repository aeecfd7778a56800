#include "mantissa/version.h"

// CMake defines both; MANTISSA_GIT_REVISION only on this file, so a new commit recompiles
// nothing else.
#ifndef MANTISSA_GIT_REVISION
#define MANTISSA_GIT_REVISION ""
#endif

namespace mantissa {
const char* version() { return MANTISSA_VERSION; }
const char* git_revision() { return MANTISSA_GIT_REVISION; }
}  // namespace mantissa
