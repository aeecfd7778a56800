#pragma once
// Memory sizes on the command line: "8GiB", "512MiB", "1.5GB", "4096" (bytes).
#include <cstdint>
#include <string>

namespace mantissa::recipes {

// Binary units B, KiB, MiB, GiB, TiB (also K, M, G, T) and decimal kB, MB, GB, TB; a bare
// number is bytes. Case of the unit's letters other than the i/B is ignored. Throws naming
// `flag` for anything else, a negative or zero size.
int64_t parse_byte_size(const std::string& text, const char* flag);

}  // namespace mantissa::recipes
