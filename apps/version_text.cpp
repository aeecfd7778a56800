#include "version_text.h"

#include <fmt/format.h>

#include <string_view>

#include "mantissa/version.h"

namespace mantissa::app {

std::string version_text() {
  const std::string_view git = git_revision();
  return git.empty() ? fmt::format("mantissa {}", version())
                     : fmt::format("mantissa {} (git {})", version(), git);
}

}  // namespace mantissa::app
