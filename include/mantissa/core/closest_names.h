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

// The candidate `wanted` most likely stands for, or "" when none is close enough to be a typo:
// the candidate equal to it up to letter case and '_', else one equal to it but for '-' and '_'
// ("adam_8bit" -> "adam8bit"), else the only one that begins with it (3 letters at least:
// "adamw8" -> "adamw8bit"), else the nearest within an edit distance of max(2, |wanted| / 3).
std::string likely_meant(const std::string& wanted, const std::vector<std::string>& candidates);

// The first `shown` names joined by ", ", then "..." and how many there are in all when the list
// is longer: "a, b, ... (1000 in all)". For messages that list names from a model or a file,
// which may hold thousands.
std::string first_names(const std::vector<std::string>& names, size_t shown);

}  // namespace mantissa
