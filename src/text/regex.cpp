#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "text/json_node.h"
#include "text/utf8.h"

namespace mantissa::text::detail {

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

struct MatchData {
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (data == nullptr) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* data;
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0)
    return fmt::format("PCRE2 error {}", code);
  return reinterpret_cast<const char*>(buffer);
}

// One match at or after `start`; false when none. Throws on a matching error (a JIT stack or
// match limit reached on a pathological pattern).
bool match_at(const pcre2_code* code, MatchData& md, std::string_view subject, size_t start,
              Span& span, const std::string& pattern, const std::string& where) {
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                             start, PCRE2_NO_UTF_CHECK, md.data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    fail(where, "regular expression {} failed on a text of {} bytes: {}", quote_untrusted(pattern),
         subject.size(), pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
  span = {ov[0], ov[1]};
  return true;
}

}  // namespace

Regex::Regex(std::string_view pattern, std::string_view context)
    : Regex(pattern, kWhere, context, 0) {}

Regex Regex::full_match(std::string_view pattern, std::string_view where,
                        std::string_view context) {
  return Regex(pattern, where, context, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
}

Regex::Regex(std::string_view pattern, std::string_view where, std::string_view context,
             uint32_t options)
    : pattern_(pattern), where_(where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | options, &error, &offset, nullptr);
  if (code == nullptr)
    fail(where_, "{}: the regular expression {} does not compile (at offset {}): {}", context,
         quote_untrusted(pattern, 200), offset, pcre2_message(error));
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  // JIT is an optimisation: where it is unavailable (PCRE2 built without it), the
  // interpreter gives the same matches.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  compiled_ = std::move(compiled);
}

Regex Regex::literal(std::string_view literal, std::string_view context) {
  // \Q...\E quotes everything up to an \E, so an \E inside the literal ends the quote, is
  // written escaped, and the quote starts again.
  std::string pattern = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.substr(i, 2) == "\\E") {
      pattern += "\\E\\\\E\\Q";
      ++i;
    } else {
      pattern += literal[i];
    }
  }
  pattern += "\\E";
  return Regex(pattern, context);
}

std::vector<Span> Regex::find_all(std::string_view subject) const {
  std::vector<Span> out;
  MatchData md(compiled_->code);
  size_t start = 0;
  Span span;
  while (start <= subject.size() &&
         match_at(compiled_->code, md, subject, start, span, pattern_, where_)) {
    // An empty match right where the previous match ended is not one (as the Rust regex
    // engines behind tokenizers treat it).
    const bool empty_after_match =
        span.first == span.second && !out.empty() && out.back().second == span.first;
    if (!empty_after_match) out.push_back(span);
    if (span.second > span.first) {
      start = span.second;
    } else {
      if (span.second >= subject.size()) break;
      const size_t n = utf8_sequence_length(subject, span.second);
      start = span.second + (n == 0 ? 1 : n);
    }
  }
  return out;
}

bool Regex::search(std::string_view subject) const {
  MatchData md(compiled_->code);
  Span span;
  return match_at(compiled_->code, md, subject, 0, span, pattern_, where_);
}

std::string Regex::replace_all(std::string_view subject, std::string_view content) const {
  std::string out;
  size_t prev = 0;
  for (const Span& m : find_all(subject)) {
    out.append(subject.substr(prev, m.first - prev));
    out.append(content);
    prev = m.second;
  }
  out.append(subject.substr(prev));
  return out;
}

std::vector<std::pair<Span, bool>> matches_and_gaps(const Regex& regex, std::string_view subject) {
  std::vector<std::pair<Span, bool>> out;
  if (subject.empty()) {
    out.push_back({{0, 0}, false});
    return out;
  }
  size_t prev = 0;
  for (const Span& m : regex.find_all(subject)) {
    if (prev != m.first) out.push_back({{prev, m.first}, false});
    out.push_back({m, true});
    prev = m.second;
  }
  if (prev != subject.size()) out.push_back({{prev, subject.size()}, false});
  return out;
}

}  // namespace mantissa::text::detail
