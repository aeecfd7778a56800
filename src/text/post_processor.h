#pragma once
// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing (its "single"
// template: special tokens around the text), ByteLevel (offsets only: no ids change) and
// Sequence of them.
#include <cstdint>
#include <optional>
#include <vector>

#include "text/json_node.h"

namespace mantissa::text::detail {

class PostProcessor {
 public:
  // One template: the ids before and after the text.
  struct Template {
    std::vector<int64_t> before, after;
  };

  PostProcessor() = default;  // none: adds nothing
  explicit PostProcessor(const JsonNode& node);

  // `ids` with the templates' special tokens around them.
  std::vector<int64_t> apply(std::vector<int64_t> ids) const;

  // The single special token the templates put before / after the text, if exactly one.
  std::optional<int64_t> bos() const;
  std::optional<int64_t> eos() const;

  const std::vector<Template>& templates() const { return templates_; }

 private:
  void parse(const JsonNode& node);
  std::vector<Template> templates_;  // applied in order, each around the previous result
};

}  // namespace mantissa::text::detail
