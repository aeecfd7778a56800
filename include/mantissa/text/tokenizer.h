#pragma once
// Hugging Face tokenizers (the `tokenizers` library's tokenizer.json, with the BOS/EOS settings
// of transformers' tokenizer_config.json): encode text to token ids and decode ids to text,
// giving the ids and strings `tokenizers` gives. Byte-level BPE (GPT-2, Llama 3, SmolLM, Qwen2)
// and SentencePiece-style BPE with byte fallback (Llama 2, TinyLlama, Mistral) are supported;
// what a file asks for beyond that is refused by name (docs/tokenizers.md).
//
// A Tokenizer is immutable once loaded: copies share its tables, and encode/decode may run on
// many threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mantissa::text {

namespace detail {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static Tokenizer from_directory(const std::string& dir);
  // tokenizer_config_json empty: no config; the post-processor alone decides BOS/EOS.
  static Tokenizer from_files(const std::string& tokenizer_json,
                              const std::string& tokenizer_config_json = "");

  // The ids of `text` (valid UTF-8, else mantissa::Error naming the byte offset).
  // add_special_tokens: the special tokens the post-processor adds (tokenizers'
  // encode(add_special_tokens=True)), or, when tokenizer_config.json sets add_bos_token or
  // add_eos_token, BOS and EOS as those say (transformers' Llama tokenizers).
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`, as tokenizers' decode. An id outside [0, vocab_size()) is an Error.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // model vocab + added tokens (max id + 1)
  // From tokenizer_config.json's bos_token / eos_token, else from the post-processor's
  // template (BOS: a special token before the text); nullopt when neither names one.
  std::optional<int64_t> bos_id() const;
  std::optional<int64_t> eos_id() const;
  // The id of a token of the vocabulary or of the added tokens, written as it is stored
  // ("Ġthe", "▁the", "<s>").
  std::optional<int64_t> token_to_id(std::string_view token) const;
  // The stored form of an id (nullopt outside the vocabulary).
  std::optional<std::string> id_to_token(int64_t id) const;
  bool is_special(int64_t id) const;  // an added token marked special

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerImpl> impl);
  std::shared_ptr<const detail::TokenizerImpl> impl_;
};

// Streaming decode, for printing tokens as they are generated (tokenizers' DecodeStream):
// step(id) returns the text that id completes, empty while a UTF-8 character or a
// byte-fallback sequence is incomplete. The concatenation of the steps equals decode of all
// ids, except that text ending in U+FFFD is held back until a later id completes it. A decoder
// whose output for a prefix of the ids is not a prefix of its output for all of them (a
// Replace across token boundaries) makes step throw mantissa::Error, as tokenizers does.
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  std::string step(int64_t id);

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int64_t> ids_;  // the window still needed to decode what comes next
  std::string prefix_;        // decode(ids_[0, prefix_index_))
  size_t prefix_index_ = 0;
};

}  // namespace mantissa::text
