#pragma once
// "Did you mean" lists for error messages that reject a name (a precision, a parameter or a
// layer): the candidates nearest to what was given, by edit distance.
#include <cstddef>
#include <string>
#include <vector>

namespace mantissa {

// Levenshtein distance between a and b.
size_t edit_distance(const std::string& a, const std::string& b);

// Up to `count` candidates, nearest to `wanted` first (ties keep the candidates' order).
// Letter case is ignored and '_' counts as '-'.
std::vector<std::string> closest_names(const std::string& wanted,
                                       const std::vector<std::string>& candidates,
                                       size_t count = 3);

}  // namespace mantissa
