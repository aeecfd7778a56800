#pragma once
// What a loaded Tokenizer holds: the tokenizer.json pipeline (normalizer, pre-tokenizer,
// model, post-processor, decoder, added tokens) and the BOS/EOS settings of
// tokenizer_config.json.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "text/added_vocabulary.h"
#include "text/bpe_model.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"

namespace mantissa::text::detail {

struct TokenizerImpl {
  std::string file;  // tokenizer.json, for messages
  std::shared_ptr<const Normalizer> normalizer;
  std::shared_ptr<const PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  PostProcessor post_processor;
  std::shared_ptr<const Decoder> decoder;
  AddedVocabulary added;
  int64_t vocab_size = 0;

  std::optional<int64_t> bos_id, eos_id;
  // Set when tokenizer_config.json says add_bos_token / add_eos_token: they replace the
  // post-processor's special tokens.
  std::optional<bool> add_bos, add_eos;
};

// Parses tokenizer.json text (`file` names it in messages) into `impl`.
void load_tokenizer_json(std::string_view text, const std::string& file, TokenizerImpl& impl);
// Applies tokenizer_config.json text to `impl` (loaded from its tokenizer.json).
void load_tokenizer_config(std::string_view text, const std::string& file, TokenizerImpl& impl);

// The contents of a tokenizer file; a missing, unreadable or oversized file is an Error that
// names it.
std::string read_tokenizer_file(const std::string& path);

}  // namespace mantissa::text::detail
