#include "mantissa/text/tokenizer.h"

#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "text/tokenizer_impl.h"
#include "text/utf8.h"

namespace mantissa::text {

using detail::kWhere;

Tokenizer::Tokenizer(std::shared_ptr<const detail::TokenizerImpl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_files(const std::string& tokenizer_json,
                                const std::string& tokenizer_config_json) {
  auto impl = std::make_shared<detail::TokenizerImpl>();
  detail::load_tokenizer_json(detail::read_tokenizer_file(tokenizer_json), tokenizer_json, *impl);
  if (!tokenizer_config_json.empty())
    detail::load_tokenizer_config(detail::read_tokenizer_file(tokenizer_config_json),
                                  tokenizer_config_json, *impl);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(kWhere, "{}: no such directory", quote_untrusted(dir, 200));
  const fs::path json = fs::path(dir) / "tokenizer.json";
  if (!fs::exists(json, ec))
    fail(kWhere,
         "{}: no tokenizer.json in this directory (only the tokenizers library's tokenizer.json "
         "format is "
         "supported)",
         quote_untrusted(dir, 200));
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  return from_files(json.string(), fs::exists(config, ec) ? config.string() : "");
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const detail::TokenizerImpl& t = *impl_;
  if (auto bad = detail::first_invalid_utf8(text))
    fail(kWhere, "the text to encode is not valid UTF-8 at byte {} of {}", *bad, text.size());
  std::vector<int64_t> ids;
  std::vector<detail::Piece> pieces;
  for (detail::Segment& raw : t.added.split(text, true, /*raw=*/true)) {
    if (raw.id) {
      ids.push_back(*raw.id);
      continue;
    }
    std::string normalized =
        t.normalizer ? t.normalizer->normalize(std::move(raw.text)) : std::move(raw.text);
    for (detail::Segment& seg : t.added.split(normalized, raw.at_text_start, /*raw=*/false)) {
      if (seg.id) {
        ids.push_back(*seg.id);
        continue;
      }
      pieces.clear();
      pieces.push_back({std::move(seg.text), seg.at_text_start});
      if (t.pre_tokenizer) t.pre_tokenizer->pre_tokenize(pieces);
      for (const detail::Piece& piece : pieces) t.model->tokenize(piece.text, ids);
    }
  }
  if (!add_special_tokens) return ids;
  if (t.add_bos || t.add_eos) {
    std::vector<int64_t> out;
    out.reserve(ids.size() + 2);
    if (*t.add_bos) out.push_back(*t.bos_id);
    out.insert(out.end(), ids.begin(), ids.end());
    if (*t.add_eos) out.push_back(*t.eos_id);
    return out;
  }
  return t.post_processor.apply(std::move(ids));
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  const detail::TokenizerImpl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= t.vocab_size)
      fail(kWhere, "cannot decode token id {}: the vocabulary of {} has ids 0 to {}", id,
           quote_untrusted(t.file, 200), t.vocab_size - 1);
    if (const detail::AddedToken* added = t.added.by_id(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    // An id between the vocabulary's ids that no token has is dropped, as tokenizers does.
    if (const std::string* token = t.model->id_to_token(id)) {
      if (skip_special_tokens) {
        if (const detail::AddedToken* same = t.added.by_content(*token); same && same->special)
          continue;
      }
      tokens.push_back(*token);
    }
  }
  std::string out;
  if (t.decoder) {
    for (const std::string& s : t.decoder->decode_chain(std::move(tokens))) out += s;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
  }
  return out;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int64_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int64_t> Tokenizer::eos_id() const { return impl_->eos_id; }

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const detail::AddedToken* t = impl_->added.by_content(token)) return t->id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (const detail::AddedToken* t = impl_->added.by_id(id)) return t->content;
  if (const std::string* s = impl_->model->id_to_token(id)) return *s;
  return std::nullopt;
}

bool Tokenizer::is_special(int64_t id) const {
  const detail::AddedToken* t = impl_->added.by_id(id);
  return t != nullptr && t->special;
}

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

namespace {
bool ends_with_replacement(const std::string& s) {
  return s.size() >= detail::kReplacementChar.size() &&
         s.compare(s.size() - detail::kReplacementChar.size(), std::string::npos,
                   detail::kReplacementChar) == 0;
}
}  // namespace

// The window of ids keeps what the decoders need to see around the new id (a space the first
// token loses, bytes of one character split over tokens); the text is the decode of the
// window minus the decode of the part already printed (tokenizers' step_decode_stream).
std::string DecodeStream::step(int64_t id) {
  if (prefix_.empty() && !ids_.empty()) {
    std::string prefix = tokenizer_.decode(ids_, skip_special_tokens_);
    if (!ends_with_replacement(prefix)) {
      prefix_ = std::move(prefix);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return {};
  if (text.compare(0, prefix_.size(), prefix_) != 0)
    fail(kWhere,
         "DecodeStream: the text of the ids so far no longer starts with the text already returned "
         "(token id {}); this tokenizer's decoder does not decode incrementally",
         id);
  std::string fresh = text.substr(prefix_.size());
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_.decode(ids_, skip_special_tokens_);
  prefix_index_ = new_prefix_index;
  return fresh;
}

}  // namespace mantissa::text
