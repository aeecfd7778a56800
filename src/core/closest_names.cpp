#include "mantissa/core/closest_names.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace mantissa {
namespace {

std::string folded(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// folded() without its '-' (and so '_'): "adam_8bit" and "adam8bit" alike.
std::string bare(const std::string& s) {
  std::string out = folded(s);
  out.erase(std::remove(out.begin(), out.end(), '-'), out.end());
  return out;
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_names(const std::string& wanted,
                                       const std::vector<std::string>& candidates, size_t count) {
  const std::string w = folded(wanted);
  std::vector<std::pair<size_t, size_t>> ranked;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i)
    ranked.emplace_back(edit_distance(w, folded(candidates[i])), i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t r = 0; r < ranked.size() && r < count; ++r)
    out.push_back(candidates[ranked[r].second]);
  return out;
}

std::string likely_meant(const std::string& wanted, const std::vector<std::string>& candidates) {
  const std::string w = folded(wanted);
  std::vector<std::string> begun;
  for (const std::string& c : candidates) {
    const std::string f = folded(c);
    if (f == w) return c;
    if (w.size() >= 3 && f.size() > w.size() && f.starts_with(w)) begun.push_back(c);
  }
  // Equal but for separators ("adam_8bit", "int8training"): that one, though another may be
  // as few edits away ("adam_8bit" is one substitution from "adamw8bit" too).
  const std::string b = bare(wanted);
  for (const std::string& c : candidates)
    if (!b.empty() && bare(c) == b) return c;
  if (begun.size() == 1) return begun.front();
  const std::vector<std::string> close = closest_names(wanted, candidates, 1);
  if (close.empty() || edit_distance(w, folded(close.front())) > std::max<size_t>(2, w.size() / 3))
    return "";
  return close.front();
}

std::string first_names(const std::vector<std::string>& names, size_t shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace mantissa
