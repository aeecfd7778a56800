#pragma once
// Memory sizes on the command line ("8GiB", "512MiB", "1.5GB", "4096" bytes) and in tables.
#include <cstdint>
#include <string>

namespace mantissa::recipes {

// Binary units B, KiB, MiB, GiB, TiB (also K, M, G, T) and decimal kB, MB, GB, TB; a bare
// number is bytes. Case of the unit's letters other than the i/B is ignored. Throws naming
// `flag` for anything else, a negative or zero size.
int64_t parse_byte_size(const std::string& text, const char* flag);

// A size that may be fractional (a mean such as bytes per sample), never in bare bytes: KiB with
// two decimals below 1 MiB (700 bytes read "0.68 KiB"), MiB below 1 GiB, else GiB.
std::string format_fractional_size(double bytes);

}  // namespace mantissa::recipes
