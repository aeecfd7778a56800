#pragma once
// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): ByteLevel, Split, Metaspace, Digits and
// Sequence of them. They cut the text between added tokens into the pieces the model encodes
// one by one, and may rewrite them (ByteLevel's byte alphabet, Metaspace's "▁").
#include <memory>
#include <string>
#include <vector>

#include "text/json_node.h"
#include "text/regex.h"

namespace mantissa::text::detail {

struct Piece {
  std::string text;
  // Starts at offset 0 of the original text (Metaspace's prepend_scheme "first" prepends only
  // there).
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their pre-tokenization; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

// nullptr for a null (or absent) pre-tokenizer; an unsupported type or option is refused.
std::shared_ptr<const PreTokenizer> parse_pre_tokenizer(const JsonNode& node);

// How a split treats the matches of its pattern (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The pieces of `text` cut at the matches of `regex` (invert: at the gaps between them),
// empty ones dropped.
std::vector<std::string> split_text(std::string_view text, const Regex& regex,
                                    SplitBehavior behavior, bool invert = false);

}  // namespace mantissa::text::detail
