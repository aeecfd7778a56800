#include "text/decoder.h"

#include "mantissa/core/untrusted_text.h"
#include "text/byte_level.h"
#include "text/pattern.h"
#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

// The characters of valid UTF-8 text, each as its byte span.
std::vector<std::string_view> chars_of(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t n = utf8_sequence_length(s, pos);
    if (n == 0) n = 1;
    out.push_back(s.substr(pos, n));
    pos += n;
  }
  return out;
}

// Bytes back from GPT-2's byte alphabet; a token with a character outside it (an added token
// such as "<|endoftext|>" maps, "▁" would not) keeps its own bytes. The result is read as
// UTF-8, invalid parts replaced by U+FFFD.
class ByteLevel final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      std::string mapped;
      bool all = true;
      for (size_t pos = 0; pos < token.size() && all;) {
        const size_t n = utf8_sequence_length(token, pos);
        const auto b = n == 0 ? std::nullopt : char_to_byte(utf8_code_point(token, pos, n));
        if (!b) {
          all = false;
        } else {
          mapped += static_cast<char>(*b);
          pos += n;
        }
      }
      bytes += all ? mapped : token;
    }
    return {utf8_lossy(bytes)};
  }
};

// "▁" back to spaces; in the first token (unless prepend_scheme is "never") it is dropped,
// as the pre-tokenizer put it there.
class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool drop_in_first)
      : replacement_(std::move(replacement)), drop_in_first_(drop_in_first) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      for (std::string_view c : chars_of(tokens[i])) {
        if (c == replacement_) {
          if (!(i == 0 && drop_in_first_)) out += ' ';
        } else {
          out += c;
        }
      }
      tokens[i] = std::move(out);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool drop_in_first_;
};

class Replace final : public Decoder {
 public:
  Replace(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
    return tokens;
  }

 private:
  Regex pattern_;
  std::string content_;
};

// Runs of <0xAB> tokens back to the bytes they stand for; a run that is not valid UTF-8
// becomes one U+FFFD per byte.
class ByteFallback final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (first_invalid_utf8(run)) {
        for (size_t i = 0; i < run_len; ++i) out.emplace_back(kReplacementChar);
      } else {
        out.push_back(run);
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& token : tokens) {
      if (auto b = byte_token(token)) {
        run += static_cast<char>(*b);
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    return out;
  }

 private:
  static std::optional<unsigned char> byte_token(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi < 0 || lo < 0) return std::nullopt;
    return static_cast<unsigned char>(hi * 16 + lo);
  }
};

class Fuse final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return {all};
  }
};

// Up to `start` leading and `stop` trailing copies of one character removed from each token.
class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      const std::vector<std::string_view> chars = chars_of(token);
      size_t begin = 0, end = chars.size();
      while (begin < start_ && begin < chars.size() && chars[begin] == content_) ++begin;
      for (size_t i = 0; i < stop_ && end > begin && chars[end - 1] == content_; ++i) --end;
      std::string out;
      for (size_t i = begin; i < end; ++i) out += chars[i];
      token = std::move(out);
    }
    return tokens;
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::shared_ptr<const Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::shared_ptr<const Decoder>> steps_;
};

std::string one_char(const JsonNode& node) {
  const std::string s = node.string();
  if (first_invalid_utf8(s) || utf8_char_count(s) != 1)
    node.fail("expected one character, found {}", quote_untrusted(s));
  return s;
}

size_t count(const JsonNode& node) {
  const int64_t n = node.integer();
  if (n < 0) node.fail("expected a count of at least 0, found {}", n);
  return static_cast<size_t>(n);
}

}  // namespace

std::shared_ptr<const Decoder> parse_decoder(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  node.expect_object();
  const JsonNode type_node = node.at("type");
  const std::string type = type_node.string();
  if (type == "ByteLevel") return std::make_shared<ByteLevel>();
  if (type == "Metaspace") {
    bool drop = true;
    if (auto aps = node.find("add_prefix_space"); aps && !aps->is_null() && !aps->boolean())
      drop = false;
    if (auto scheme = node.find("prepend_scheme")) {
      const std::string s = scheme->string();
      if (s != "first" && s != "never" && s != "always")
        scheme->fail("unsupported prepend_scheme {} (supported: first, never, always)",
                     quote_untrusted(s));
      drop = drop && s != "never";
    }
    return std::make_shared<Metaspace>(one_char(node.at("replacement")), drop);
  }
  if (type == "Replace")
    return std::make_shared<Replace>(parse_pattern(node.at("pattern")),
                                     node.at("content").string());
  if (type == "ByteFallback") return std::make_shared<ByteFallback>();
  if (type == "Fuse") return std::make_shared<Fuse>();
  if (type == "Strip")
    return std::make_shared<Strip>(one_char(node.at("content")), count(node.at("start")),
                                   count(node.at("stop")));
  if (type == "Sequence") {
    const JsonNode list = node.at("decoders");
    list.expect_array();
    std::vector<std::shared_ptr<const Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonNode item = list.at(i);
      if (item.is_null()) item.fail("a Sequence step cannot be null");
      steps.push_back(parse_decoder(item));
    }
    return std::make_shared<Sequence>(std::move(steps));
  }
  type_node.fail(
      "unsupported decoder type {} (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
      "Strip, "
      "Sequence)",
      quote_untrusted(type));
}

}  // namespace mantissa::text::detail
