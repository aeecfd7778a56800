#pragma once
// Normalizers of tokenizer.json ("normalizer"): Prepend, Replace, NFC and Sequence of them.
// They rewrite the text of each piece between added tokens before pre-tokenization.
#include <memory>
#include <string>

#include "text/json_node.h"

namespace mantissa::text::detail {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// nullptr for a null (or absent) normalizer; an unsupported type or option is refused.
std::shared_ptr<const Normalizer> parse_normalizer(const JsonNode& node);

}  // namespace mantissa::text::detail
