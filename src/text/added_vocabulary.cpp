#include "text/added_vocabulary.h"

#include <algorithm>

#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

// Unicode White_Space (what tokenizers' lstrip / rstrip take, via the regex \s).
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The offset where the whitespace at the end of text[0, end) starts.
size_t trailing_space_start(std::string_view text, size_t end) {
  size_t pos = end;
  while (pos > 0) {
    size_t lead = pos - 1;
    while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
    const size_t n = utf8_sequence_length(text, lead);
    if (n == 0 || !is_white_space(utf8_code_point(text, lead, n))) break;
    pos = lead;
  }
  return pos;
}

// The offset where the whitespace at text[begin, ...) ends.
size_t leading_space_end(std::string_view text, size_t begin) {
  size_t pos = begin;
  while (pos < text.size()) {
    const size_t n = utf8_sequence_length(text, pos);
    if (n == 0 || !is_white_space(utf8_code_point(text, pos, n))) break;
    pos += n;
  }
  return pos;
}

// The last character of text[0, end).
std::string_view last_char(std::string_view text, size_t end) {
  size_t lead = end - 1;
  while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
  return text.substr(lead, end - lead);
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string pattern, size_t token) {
  if (pattern.empty()) return;  // tokenizers ignores empty tokens
  if (by_first_byte.empty()) by_first_byte.resize(256);
  by_first_byte[static_cast<unsigned char>(pattern[0])].emplace_back(std::move(pattern), token);
  empty = false;
}

void AddedVocabulary::Matcher::finish() {
  for (auto& list : by_first_byte)
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::optional<std::tuple<size_t, size_t, size_t>> AddedVocabulary::Matcher::find(
    std::string_view text, size_t from) const {
  if (empty) return std::nullopt;
  for (size_t i = from; i < text.size(); ++i) {
    for (const auto& [pattern, token] : by_first_byte[static_cast<unsigned char>(text[i])])
      if (text.compare(i, pattern.size(), pattern) == 0)
        return std::make_tuple(i, i + pattern.size(), token);
  }
  return std::nullopt;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_.emplace(t.id, i);
    by_content_.emplace(t.content, i);
    if (t.normalized)
      normalized_.add(normalizer ? normalizer->normalize(t.content) : t.content, i);
    else
      raw_.add(t.content, i);
  }
  raw_.finish();
  normalized_.finish();
  // A word character as the Rust regex crate's Unicode \w (tokenizers' single_word check):
  // PCRE2's \w leaves out the marks and the joiners.
  constexpr std::string_view kWordChar = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";
  word_start_.emplace(fmt::format("\\A{}", kWordChar), "single_word");
  word_end_.emplace(fmt::format("{}\\z", kWordChar), "single_word");
}

const AddedToken* AddedVocabulary::by_id(int64_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

std::vector<Segment> AddedVocabulary::split(std::string_view text, bool at_text_start,
                                            bool raw) const {
  const Matcher& matcher = raw ? raw_ : normalized_;
  std::vector<Segment> out;
  auto push_text = [&](size_t begin, size_t end) {
    if (end > begin)
      out.push_back({std::string(text.substr(begin, end - begin)), std::nullopt,
                     at_text_start && begin == 0});
  };
  size_t done = 0;    // text before this is in `out`
  size_t search = 0;  // where the next search starts (after the previous match)
  while (auto m = matcher.find(text, search)) {
    auto [start, stop, index] = *m;
    search = stop;
    const AddedToken& token = tokens_[index];
    if (token.single_word) {
      const bool word_before = start > 0 && word_end_->search(last_char(text, start));
      const bool word_after = stop < text.size() && word_start_->search(text.substr(stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text, start), done);
    if (token.rstrip) stop = leading_space_end(text, stop);
    push_text(done, start);
    out.push_back({std::string(text.substr(start, stop - start)), token.id, false});
    done = stop;
  }
  push_text(done, text.size());
  return out;
}

}  // namespace mantissa::text::detail
