#pragma once
// The Unicode regular expressions of tokenizer files (split patterns such as GPT-2's and
// Llama 3's, Replace patterns), run by PCRE2 with UTF and Unicode properties (UCP), compiled
// to machine code by its JIT where the platform has one.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mantissa::text::detail {

// A byte range [first, second) of the subject.
using Span = std::pair<size_t, size_t>;

class Regex {
 public:
  // Compiles `pattern`; on a syntax error throws mantissa::Error with PCRE2's message and
  // offset, prefixed by `context` ("'f/tokenizer.json': pre_tokenizer.pattern.Regex").
  Regex(std::string_view pattern, std::string_view context);
  // A pattern that matches `literal` itself.
  static Regex literal(std::string_view literal, std::string_view context);
  // A pattern that matches only a whole subject (Python's re.fullmatch; compiled anchored at
  // both ends, so search() tells whether all of the subject matches). Its errors are labelled
  // [where] instead of [tokenizer].
  static Regex full_match(std::string_view pattern, std::string_view where,
                          std::string_view context);

  // Every non-overlapping match, left to right (an empty match moves the search on by one
  // character). `subject` must be valid UTF-8 (the tokenizer checks its input once).
  std::vector<Span> find_all(std::string_view subject) const;
  // Whether a match starts at the very beginning / anywhere.
  bool search(std::string_view subject) const;

  // `subject` with every match replaced by `content` (taken literally).
  std::string replace_all(std::string_view subject, std::string_view content) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string_view pattern, std::string_view where, std::string_view context,
        uint32_t options);

  struct Compiled;
  std::string pattern_;
  std::string where_;
  std::shared_ptr<const Compiled> compiled_;
};

// The match spans with the gaps between them, covering `subject`: (span, is_match), as
// tokenizers' Pattern::find_matches (an empty subject gives one empty gap).
std::vector<std::pair<Span, bool>> matches_and_gaps(const Regex& regex, std::string_view subject);

}  // namespace mantissa::text::detail
