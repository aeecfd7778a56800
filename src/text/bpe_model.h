#pragma once
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): each pre-token becomes its
// characters' ids (bytes as <0xAB> tokens under byte_fallback, else the unknown token), then
// merges apply lowest rank first, leftmost first among equal ranks, as tokenizers does.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_node.h"

namespace mantissa::text::detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>>;

// The largest token id a file may use (model vocabulary and added tokens).
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

class BpeModel {
 public:
  explicit BpeModel(const JsonNode& model);

  // Appends the ids of one pre-token to `out`.
  void tokenize(std::string_view word, std::vector<int64_t>& out) const;

  std::optional<int64_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int64_t id) const;  // nullptr when no token has it
  int64_t max_id() const { return static_cast<int64_t>(id_to_token_.size()) - 1; }  // -1 if empty

 private:
  struct Merge {
    uint32_t rank;
    int64_t new_id;
  };
  static uint64_t pair_key(int64_t a, int64_t b) {
    return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
  }

  Vocab vocab_;
  std::vector<std::optional<std::string>> id_to_token_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int64_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::vector<std::optional<int64_t>> byte_ids_;  // <0xAB> tokens under byte_fallback
};

}  // namespace mantissa::text::detail
