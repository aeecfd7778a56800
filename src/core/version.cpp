#include "mantissa/version.h"

namespace mantissa {
const char* version() { return MANTISSA_VERSION; }
}  // namespace mantissa
