#include "text/bpe_model.h"

#include <queue>

#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"
#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

// The two halves of a merge: "a b" (the older format) or ["a", "b"].
std::pair<std::string, std::string> merge_pair(const JsonNode& item) {
  if (item.is_string()) {
    const std::string s = item.string();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      item.fail("a merge written as a string must be two tokens separated by one space, found {}",
                quote_untrusted(s));
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (item.is_array()) {
    if (item.size() != 2) item.fail("a merge must have two tokens, found {}", item.size());
    return {item.at(size_t{0}).string(), item.at(size_t{1}).string()};
  }
  item.fail("a merge must be \"a b\" or [\"a\", \"b\"], found {}", json_kind(item.value()));
}

// A field that must be null, absent or "" because the model does not implement it (GPT-2's
// file writes "" for the subword prefix and suffix, which change nothing).
void require_unset(const JsonNode& model, std::string_view key, std::string_view why) {
  auto f = model.find(key);
  if (f && !f->is_null() && !(f->is_string() && f->string().empty()))
    f->fail("{} is not supported ({}); found {}", key, why, io::json_excerpt(f->value()));
}

}  // namespace

BpeModel::BpeModel(const JsonNode& model) {
  model.expect_object();
  if (auto type = model.find("type")) {
    if (type->string() != "BPE")
      type->fail("unsupported model type {} (supported: BPE)", quote_untrusted(type->string()));
  } else if (!model.find("merges")) {
    model.fail("missing field 'type' (supported: BPE)");
  }
  if (auto dropout = model.find("dropout");
      dropout && !dropout->is_null() && dropout->number() != 0.0)
    dropout->fail("BPE dropout {} is not supported (encoding would be random); it must be null",
                  dropout->number());
  require_unset(model, "continuing_subword_prefix", "WordPiece-style subword prefixes");
  require_unset(model, "end_of_word_suffix", "end-of-word suffixes");

  const JsonNode vocab = model.at("vocab");
  vocab.expect_object();
  for (const auto& [token, id_json] : vocab.value().items()) {
    const JsonNode id_node(id_json, vocab.file(), vocab.child_path(escape_untrusted(token)));
    const int64_t id = id_node.integer();
    if (id < 0 || id > kMaxTokenId) id_node.fail("token id {} is outside [0, {}]", id, kMaxTokenId);
    if (static_cast<size_t>(id) >= id_to_token_.size())
      id_to_token_.resize(static_cast<size_t>(id) + 1);
    if (id_to_token_[id])
      id_node.fail("id {} is given to two tokens, {} and {}", id,
                   quote_untrusted(*id_to_token_[id]), quote_untrusted(token));
    id_to_token_[id] = token;
    vocab_.emplace(token, id);
  }

  const JsonNode merges = model.at("merges");
  merges.expect_array();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const JsonNode item = merges.at(rank);
    const auto [a, b] = merge_pair(item);
    const auto ia = vocab_.find(a), ib = vocab_.find(b), inew = vocab_.find(a + b);
    if (ia == vocab_.end())
      item.fail("merge token {} is not in the vocabulary", quote_untrusted(a));
    if (ib == vocab_.end())
      item.fail("merge token {} is not in the vocabulary", quote_untrusted(b));
    if (inew == vocab_.end())
      item.fail("merged token {} is not in the vocabulary", quote_untrusted(a + b));
    // A repeated pair keeps its last rank, as tokenizers' map does.
    merges_[pair_key(ia->second, ib->second)] = {static_cast<uint32_t>(rank), inew->second};
  }

  if (auto unk = model.find("unk_token"); unk && !unk->is_null()) {
    const std::string name = unk->string();
    const auto it = vocab_.find(name);
    if (it == vocab_.end())
      unk->fail("unk_token {} is not in the vocabulary", quote_untrusted(name));
    unk_id_ = it->second;
  }
  fuse_unk_ = model.boolean_or("fuse_unk", false);
  byte_fallback_ = model.boolean_or("byte_fallback", false);
  ignore_merges_ = model.boolean_or("ignore_merges", false);
  if (byte_fallback_) {
    byte_ids_.resize(256);
    for (int b = 0; b < 256; ++b) byte_ids_[b] = token_to_id(fmt::format("<0x{:02X}>", b));
  }
}

std::optional<int64_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(id_to_token_.size()) || !id_to_token_[id])
    return nullptr;
  return &*id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  // The symbols: a doubly linked list over one vector, a merged-away symbol marked dead.
  struct Symbol {
    int64_t id;
    int64_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int64_t id) {
    const auto n = static_cast<int64_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  int64_t pending_unk = -1;  // an unknown token not yet added (fuse_unk may extend it)
  for (size_t pos = 0; pos < word.size();) {
    size_t len = utf8_sequence_length(word, pos);
    if (len == 0) len = 1;  // cannot happen on checked input; keeps the loop finite
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    if (auto id = token_to_id(ch)) {
      if (pending_unk >= 0) {
        add(pending_unk);
        pending_unk = -1;
      }
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)].has_value();
      if (all) {
        // As tokenizers: an unknown token still pending goes after these bytes.
        for (const char c : ch) add(*byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unknown token the character is dropped, as tokenizers does.
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    uint32_t rank;
    int64_t pos;
    int64_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int64_t pos) {
    const int64_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    const int64_t right_pos = left.next;
    const auto it = merges_.find(pair_key(left.id, symbols[right_pos].id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    Symbol& right = symbols[right_pos];
    left.id = top.new_id;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace mantissa::text::detail
