#pragma once
// The "pattern" field of Split, Replace (normalizer and decoder): {"String": s} matches s
// literally, {"Regex": r} is a regular expression.
#include "text/json_node.h"
#include "text/regex.h"

namespace mantissa::text::detail {

Regex parse_pattern(const JsonNode& node);

}  // namespace mantissa::text::detail
