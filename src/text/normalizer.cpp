#include "text/normalizer.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "mantissa/core/untrusted_text.h"
#include "text/pattern.h"

namespace mantissa::text::detail {

namespace {

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    if (text.empty()) return text;
    return prefix_ + text;
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  Regex pattern_;
  std::string content_;
};

// Unicode canonical composition (NFC), by utf8proc.
class Nfc final : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) fail(kWhere, "NFC normalization failed: {}", utf8proc_errmsg(n));
    std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::shared_ptr<const Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& step : steps_) text = step->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::shared_ptr<const Normalizer>> steps_;
};

}  // namespace

std::shared_ptr<const Normalizer> parse_normalizer(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  node.expect_object();
  const JsonNode type_node = node.at("type");
  const std::string type = type_node.string();
  if (type == "Prepend") return std::make_shared<Prepend>(node.at("prepend").string());
  if (type == "Replace")
    return std::make_shared<Replace>(parse_pattern(node.at("pattern")),
                                     node.at("content").string());
  if (type == "NFC") return std::make_shared<Nfc>();
  if (type == "Sequence") {
    const JsonNode list = node.at("normalizers");
    list.expect_array();
    std::vector<std::shared_ptr<const Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonNode item = list.at(i);
      if (item.is_null()) item.fail("a Sequence step cannot be null");
      steps.push_back(parse_normalizer(item));
    }
    return std::make_shared<Sequence>(std::move(steps));
  }
  type_node.fail("unsupported normalizer type {} (supported: Prepend, Replace, NFC, Sequence)",
                 quote_untrusted(type));
}

}  // namespace mantissa::text::detail
