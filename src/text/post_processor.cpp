#include "text/post_processor.h"

#include "mantissa/core/untrusted_text.h"

namespace mantissa::text::detail {

PostProcessor::PostProcessor(const JsonNode& node) {
  if (!node.is_null()) parse(node);
}

void PostProcessor::parse(const JsonNode& node) {
  node.expect_object();
  const JsonNode type_node = node.at("type");
  const std::string type = type_node.string();
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const JsonNode list = node.at("processors");
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) parse(list.at(i));
    return;
  }
  if (type != "TemplateProcessing")
    type_node.fail(
        "unsupported post-processor type {} (supported: TemplateProcessing, ByteLevel, Sequence)",
        quote_untrusted(type));
  const JsonNode specials = node.at("special_tokens");
  specials.expect_object();
  const JsonNode single = node.at("single");
  single.expect_array();
  Template t;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonNode piece = single.at(i);
    piece.expect_object();
    if (auto seq = piece.find("Sequence")) {
      const JsonNode id = seq->at("id");
      if (id.string() != "A")
        id.fail("the single-sequence template can only hold sequence A, found {}",
                quote_untrusted(id.string()));
      if (seen_sequence) piece.fail("the template holds sequence A twice");
      seen_sequence = true;
      continue;
    }
    auto special = piece.find("SpecialToken");
    if (!special) piece.fail("expected a \"Sequence\" or \"SpecialToken\" piece");
    const std::string name = special->at("id").string();
    auto entry = specials.find(name);
    if (!entry)
      special->at("id").fail("special token {} is not in special_tokens", quote_untrusted(name));
    const JsonNode ids = entry->at("ids");
    ids.expect_array();
    for (size_t k = 0; k < ids.size(); ++k) {
      const int64_t id = ids.at(k).integer();
      if (id < 0) ids.at(k).fail("token id {} is negative", id);
      (seen_sequence ? t.after : t.before).push_back(id);
    }
  }
  if (!seen_sequence) single.fail("the template has no sequence A (\"$A\")");
  templates_.push_back(std::move(t));
}

std::vector<int64_t> PostProcessor::apply(std::vector<int64_t> ids) const {
  for (const Template& t : templates_) {
    std::vector<int64_t> out(t.before);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), t.after.begin(), t.after.end());
    ids = std::move(out);
  }
  return ids;
}

std::optional<int64_t> PostProcessor::bos() const {
  if (templates_.size() == 1 && templates_[0].before.size() == 1) return templates_[0].before[0];
  return std::nullopt;
}

std::optional<int64_t> PostProcessor::eos() const {
  if (templates_.size() == 1 && templates_[0].after.size() == 1) return templates_[0].after[0];
  return std::nullopt;
}

}  // namespace mantissa::text::detail
