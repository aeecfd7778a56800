#pragma once
// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
// Strip and Sequence of them. Each turns the list of token strings into another list; the
// tokenizer joins the last one.
#include <memory>
#include <string>
#include <vector>

#include "text/json_node.h"

namespace mantissa::text::detail {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// nullptr for a null (or absent) decoder; an unsupported type or option is refused.
std::shared_ptr<const Decoder> parse_decoder(const JsonNode& node);

}  // namespace mantissa::text::detail
