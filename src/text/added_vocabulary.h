#pragma once
// The added tokens of tokenizer.json ("added_tokens"): special tokens such as "<s>" and other
// tokens added after training. They are found in the text before the model runs, with their
// flags: single_word (only as a whole word), lstrip / rstrip (take the whitespace on that
// side), normalized (found in the normalized text rather than the raw text), special
// (skipped by decode(skip_special_tokens)).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_node.h"
#include "text/normalizer.h"
#include "text/regex.h"

namespace mantissa::text::detail {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A part of the text: an added token (id set) or text the model encodes.
struct Segment {
  std::string text;
  std::optional<int64_t> id;
  bool at_text_start = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // normalizer: the tokenizer's (nullptr for none); a normalized token is looked for in its
  // normalized form.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // `text` cut at the tokens not normalized (raw: true) or normalized (raw: false).
  std::vector<Segment> split(std::string_view text, bool at_text_start, bool raw) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* by_id(int64_t id) const;
  const AddedToken* by_content(std::string_view content) const;

 private:
  // Leftmost-longest search over a set of strings (tokenizers uses Aho-Corasick with that
  // match kind): candidates grouped by first byte, longest first.
  struct Matcher {
    std::vector<std::vector<std::pair<std::string, size_t>>> by_first_byte;  // (pattern, token)
    bool empty = true;
    void add(std::string pattern, size_t token);
    void finish();
    // The first match at or after `from`: (start, end, token); nullopt when none.
    std::optional<std::tuple<size_t, size_t, size_t>> find(std::string_view text,
                                                           size_t from) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int64_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Matcher raw_, normalized_;
  std::optional<Regex> word_start_, word_end_;
};

}  // namespace mantissa::text::detail
