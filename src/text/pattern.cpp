#include "text/pattern.h"

#include "mantissa/core/untrusted_text.h"

namespace mantissa::text::detail {

Regex parse_pattern(const JsonNode& node) {
  node.expect_object();
  if (node.size() != 1) node.fail("expected an object with one key, \"String\" or \"Regex\"");
  const std::string context = fmt::format("'{}': {}", node.file(), node.path());
  if (auto s = node.find("String")) return Regex::literal(s->string(), context + ".String");
  if (auto r = node.find("Regex")) return Regex(r->string(), context + ".Regex");
  node.fail("unsupported pattern kind '{}' (supported: String, Regex)",
            escape_untrusted(node.value().begin().key()));
}

}  // namespace mantissa::text::detail
