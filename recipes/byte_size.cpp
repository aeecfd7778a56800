#include "mantissa/recipes/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <utility>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::recipes {

int64_t parse_byte_size(const std::string& text, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  // Decimal only: stod also reads hex ("0x10" was 16 bytes), "inf" and "nan".
  if (text.substr(0, used).find_first_not_of("0123456789.eE+-") != std::string::npos) used = 0;
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  std::string lower;
  for (char c : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::pair<const char*, double>> units = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"kb", 1e3},
      {"m", 1024.0 * 1024},
      {"mib", 1024.0 * 1024},
      {"mb", 1e6},
      {"g", 1024.0 * 1024 * 1024},
      {"gib", 1024.0 * 1024 * 1024},
      {"gb", 1e9},
      {"t", 1024.0 * 1024 * 1024 * 1024},
      {"tib", 1024.0 * 1024 * 1024 * 1024},
      {"tb", 1e12}};
  double factor = 0;
  for (const auto& [name, f] : units)
    if (lower == name) factor = f;
  const double bytes = v * factor;
  MANTISSA_CHECK(
      used > 0 && factor > 0 && std::isfinite(bytes) && bytes >= 1 && bytes < 9e18, "memory",
      "{} expects a size such as 8GiB, 512MiB, 1.5GB or 4096 (bytes), got '{}'", flag, text);
  return static_cast<int64_t>(bytes);
}

std::string format_fractional_size(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  const double a = std::fabs(bytes);
  // Chosen on the rounded value, so 1023.999 KiB reads "1.00 MiB", not "1024.00 KiB".
  if (std::round(a / kKiB * 100) < 1024 * 100) return fmt::format("{:.2f} KiB", bytes / kKiB);
  if (std::round(a / kMiB * 100) < 1024 * 100) return fmt::format("{:.2f} MiB", bytes / kMiB);
  return fmt::format("{:.2f} GiB", bytes / kGiB);
}

}  // namespace mantissa::recipes
