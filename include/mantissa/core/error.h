#pragma once
// mantissa::Error: every user-facing failure. Messages start with "[where] " so a user can
// tell which op or component rejected the input.
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace mantissa {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(std::string_view where, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format("[{}] {}", where, fmt::format(f, std::forward<Args>(args)...)));
}

// Cheap check used at op entry: MANTISSA_CHECK(cond, "op", "message {}", x).
#define MANTISSA_CHECK(cond, where, ...)               \
  do {                                                 \
    if (!(cond)) ::mantissa::fail(where, __VA_ARGS__); \
  } while (0)

}  // namespace mantissa
