#include "text/pre_tokenizer.h"

#include "mantissa/core/untrusted_text.h"
#include "text/byte_level.h"
#include "text/pattern.h"
#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

// GPT-2's split: contractions, letters, numbers and other symbols with an optional leading
// space, then whitespace (a run before a non-space keeps its last space for the next word).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies `split` to every piece, keeping the start-of-text flag on a first sub-piece that
// starts where its piece starts.
template <typename Fn>
void split_each(std::vector<Piece>& pieces, Fn&& split) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& piece : pieces) {
    std::vector<std::string> parts = split(piece);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].empty()) continue;
      out.push_back({std::move(parts[i]), piece.at_text_start && i == 0});
    }
  }
  pieces = std::move(out);
}

std::vector<std::string> slices(std::string_view text,
                                const std::vector<std::pair<Span, bool>>& parts) {
  std::vector<std::string> out;
  for (const auto& [span, remove] : parts)
    if (!remove) out.emplace_back(text.substr(span.first, span.second - span.first));
  return out;
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_optional<Regex>(kGpt2Regex, "ByteLevel") : std::nullopt) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](Piece& piece) {
      std::string text = std::move(piece.text);
      if (add_prefix_space_ && (text.empty() || text[0] != ' ')) text.insert(0, " ");
      if (!regex_) return std::vector<std::string>{std::move(text)};
      return split_text(text, *regex_, SplitBehavior::kIsolated);
    });
    for (Piece& piece : pieces) piece.text = bytes_to_chars(piece.text);
  }

 private:
  bool add_prefix_space_;
  std::optional<Regex> regex_;
};

class Split final : public PreTokenizer {
 public:
  Split(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces,
               [&](Piece& piece) { return split_text(piece.text, pattern_, behavior_, invert_); });
  }

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { kFirst, kNever, kAlways };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        replacement_regex_(Regex::literal(replacement_, "Metaspace")),
        space_(Regex::literal(" ", "Metaspace")) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](Piece& piece) {
      std::string text = space_.replace_all(piece.text, replacement_);
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && piece.at_text_start)))
        text.insert(0, replacement_);
      if (!split_) return std::vector<std::string>{std::move(text)};
      return split_text(text, replacement_regex_, SplitBehavior::kMergedWithNext);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Regex replacement_regex_;
  Regex space_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual), digit_(R"(\p{N})", "Digits") {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](Piece& piece) {
      return split_text(piece.text, digit_,
                        individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
    });
  }

 private:
  bool individual_;
  Regex digit_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::shared_ptr<const PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::shared_ptr<const PreTokenizer>> steps_;
};

SplitBehavior parse_behavior(const JsonNode& node) {
  const std::string name = node.string();
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  node.fail(
      "unsupported split behavior {} (supported: Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext, Contiguous)",
      quote_untrusted(name));
}

PrependScheme parse_prepend_scheme(const JsonNode& node) {
  if (node.find("add_prefix_space") && !node.at("add_prefix_space").is_null() &&
      !node.at("add_prefix_space").boolean()) {
    // Files before prepend_scheme existed: add_prefix_space false means never.
    if (auto scheme = node.find("prepend_scheme"); scheme && scheme->string() != "never")
      scheme->fail("add_prefix_space is false but prepend_scheme is {}",
                   quote_untrusted(scheme->string()));
    return PrependScheme::kNever;
  }
  auto scheme = node.find("prepend_scheme");
  if (!scheme) return PrependScheme::kAlways;
  const std::string name = scheme->string();
  if (name == "first") return PrependScheme::kFirst;
  if (name == "never") return PrependScheme::kNever;
  if (name == "always") return PrependScheme::kAlways;
  scheme->fail("unsupported prepend_scheme {} (supported: first, never, always)",
               quote_untrusted(name));
}

std::string parse_replacement(const JsonNode& node) {
  const JsonNode r = node.at("replacement");
  const std::string s = r.string();
  if (first_invalid_utf8(s) || utf8_char_count(s) != 1)
    r.fail("expected one character, found {}", quote_untrusted(s));
  return s;
}

}  // namespace

std::vector<std::string> split_text(std::string_view text, const Regex& regex,
                                    SplitBehavior behavior, bool invert) {
  auto matches = matches_and_gaps(regex, text);
  if (invert)
    for (auto& m : matches) m.second = !m.second;
  // (span, remove)
  std::vector<std::pair<Span, bool>> parts;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& m : matches) parts.push_back({m.first, false});
      break;
    case SplitBehavior::kRemoved:
      parts = matches;
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& [span, is_match] : matches) {
        if (is_match == previous_match && !parts.empty())
          parts.back().first.second = span.second;
        else
          parts.push_back({span, false});
        previous_match = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& [span, is_match] : matches) {
        if (is_match && !previous_match && !parts.empty())
          parts.back().first.second = span.second;
        else
          parts.push_back({span, false});
        previous_match = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        const auto& [span, is_match] = *it;
        if (is_match && !previous_match && !parts.empty())
          parts.back().first.first = span.first;
        else
          parts.push_back({span, false});
        previous_match = is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  return slices(text, parts);
}

std::shared_ptr<const PreTokenizer> parse_pre_tokenizer(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  node.expect_object();
  const JsonNode type_node = node.at("type");
  const std::string type = type_node.string();
  if (type == "ByteLevel") {
    return std::make_shared<ByteLevel>(node.boolean_or("add_prefix_space", true),
                                       node.boolean_or("use_regex", true));
  }
  if (type == "Split") {
    return std::make_shared<Split>(parse_pattern(node.at("pattern")),
                                   parse_behavior(node.at("behavior")),
                                   node.boolean_or("invert", false));
  }
  if (type == "Metaspace") {
    return std::make_shared<Metaspace>(parse_replacement(node), parse_prepend_scheme(node),
                                       node.boolean_or("split", true));
  }
  if (type == "Digits")
    return std::make_shared<Digits>(node.boolean_or("individual_digits", false));
  if (type == "Sequence") {
    const JsonNode list = node.at("pretokenizers");
    list.expect_array();
    std::vector<std::shared_ptr<const PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonNode item = list.at(i);
      if (item.is_null()) item.fail("a Sequence step cannot be null");
      steps.push_back(parse_pre_tokenizer(item));
    }
    return std::make_shared<Sequence>(std::move(steps));
  }
  type_node.fail(
      "unsupported pre-tokenizer type {} (supported: ByteLevel, Split, Metaspace, Digits, "
      "Sequence)",
      quote_untrusted(type));
}

}  // namespace mantissa::text::detail
