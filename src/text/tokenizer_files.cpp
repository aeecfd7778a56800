// Reading tokenizer.json and tokenizer_config.json into a TokenizerImpl.
#include <filesystem>
#include <fstream>

#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"
#include "text/tokenizer_impl.h"

namespace mantissa::text::detail {

namespace {

// Real tokenizer.json files stay below 40 MB; a larger file is not a tokenizer.
constexpr size_t kMaxFileBytes = size_t{512} << 20;

nlohmann::json parse_file_json(std::string_view text, const std::string& file) {
  const std::string what = quote_untrusted(file, 200);
  io::check_json_nesting(text, kWhere, what);
  try {
    return io::parse_json_refusing_duplicate_keys(text, kWhere, what);
  } catch (const nlohmann::json::exception& e) {
    fail(kWhere, "{}: not valid JSON ({}); the file is damaged or not a tokenizer file", what,
         escape_untrusted(e.what(), 200));
  }
}

AddedToken parse_added_token(const JsonNode& node) {
  node.expect_object();
  AddedToken t;
  t.id = node.at("id").integer();
  if (t.id < 0 || t.id > kMaxTokenId)
    node.at("id").fail("token id {} is outside [0, {}]", t.id, kMaxTokenId);
  t.content = node.at("content").string();
  t.single_word = node.boolean_or("single_word", false);
  t.lstrip = node.boolean_or("lstrip", false);
  t.rstrip = node.boolean_or("rstrip", false);
  t.special = node.boolean_or("special", false);
  t.normalized = node.boolean_or("normalized", !t.special);
  return t;
}

// A config token: a string, an AddedToken object ({"content": ...}) or null.
std::optional<std::string> config_token(const JsonNode& config, std::string_view key) {
  auto node = config.find(key);
  if (!node || node->is_null()) return std::nullopt;
  if (node->is_string()) return node->string();
  if (node->is_object()) return node->at("content").string();
  node->fail("expected a token (a string or an object with \"content\"), found {}",
             json_kind(node->value()));
}

std::optional<int64_t> token_id(const TokenizerImpl& impl, std::string_view token) {
  if (const AddedToken* t = impl.added.by_content(token)) return t->id;
  return impl.model->token_to_id(token);
}

}  // namespace

std::string read_tokenizer_file(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string what = quote_untrusted(path, 200);
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(kWhere, "{}: no such file", what);
  if (fs::is_directory(status)) fail(kWhere, "{}: is a directory, not a file", what);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kWhere, "{}: cannot be opened for reading", what);
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes)
      fail(kWhere, "{}: larger than {} MiB; not a tokenizer file", what, kMaxFileBytes >> 20);
  }
  if (in.bad()) fail(kWhere, "{}: read error", what);
  return text;
}

void load_tokenizer_json(std::string_view text, const std::string& file, TokenizerImpl& impl) {
  impl.file = file;
  const nlohmann::json json = parse_file_json(text, file);
  const JsonNode root(json, file, "");
  root.expect_object();
  for (const char* key : {"truncation", "padding"}) {
    if (auto f = root.find(key); f && !f->is_null())
      f->fail(
          "{} is not supported (encode returns every id of the text); it must be null, found {}",
          key, io::json_excerpt(f->value()));
  }
  if (auto n = root.find("normalizer")) impl.normalizer = parse_normalizer(*n);
  if (auto p = root.find("pre_tokenizer")) impl.pre_tokenizer = parse_pre_tokenizer(*p);
  impl.model = std::make_unique<BpeModel>(root.at("model"));
  if (auto p = root.find("post_processor")) impl.post_processor = PostProcessor(*p);
  if (auto d = root.find("decoder")) impl.decoder = parse_decoder(*d);

  std::vector<AddedToken> added;
  if (auto list = root.find("added_tokens"); list && !list->is_null()) {
    list->expect_array();
    for (size_t i = 0; i < list->size(); ++i) {
      const JsonNode item = list->at(i);
      AddedToken t = parse_added_token(item);
      // tokenizers gives an added token that is also a model token the model's id; a file
      // that says otherwise is inconsistent.
      if (auto model_id = impl.model->token_to_id(t.content); model_id && *model_id != t.id)
        item.fail("added token {} has id {} but the model vocabulary gives it id {}",
                  quote_untrusted(t.content), t.id, *model_id);
      if (const std::string* other = impl.model->id_to_token(t.id); other && *other != t.content)
        item.fail("added token {} has id {}, which the model vocabulary gives to {}",
                  quote_untrusted(t.content), t.id, quote_untrusted(*other));
      for (const AddedToken& prev : added)
        if (prev.id == t.id && prev.content != t.content)
          item.fail("id {} is given to two added tokens, {} and {}", t.id,
                    quote_untrusted(prev.content), quote_untrusted(t.content));
      added.push_back(std::move(t));
    }
  }
  impl.added = AddedVocabulary(std::move(added), impl.normalizer.get());
  int64_t max_id = impl.model->max_id();
  for (const AddedToken& t : impl.added.tokens()) max_id = std::max(max_id, t.id);
  impl.vocab_size = max_id + 1;
  // The template's special tokens must be tokens of this vocabulary.
  for (const PostProcessor::Template& t : impl.post_processor.templates())
    for (const auto* ids : {&t.before, &t.after})
      for (const int64_t id : *ids)
        if (!impl.added.by_id(id) && !impl.model->id_to_token(id))
          root.at("post_processor")
              .fail("the template adds token id {}, which no token of the vocabulary has", id);
  // Until a config says otherwise, BOS and EOS are what the template puts around the text.
  impl.bos_id = impl.post_processor.bos();
  impl.eos_id = impl.post_processor.eos();
}

void load_tokenizer_config(std::string_view text, const std::string& file, TokenizerImpl& impl) {
  const nlohmann::json json = parse_file_json(text, file);
  const JsonNode root(json, file, "");
  root.expect_object();
  auto resolve = [&](std::string_view key, std::optional<int64_t>& id) {
    const auto token = config_token(root, key);
    if (!token) return;
    const auto found = token_id(impl, *token);
    if (!found)
      root.at(key).fail("token {} is not in the vocabulary of {}", quote_untrusted(*token),
                        quote_untrusted(impl.file, 200));
    id = found;
  };
  resolve("bos_token", impl.bos_id);
  resolve("eos_token", impl.eos_id);
  auto add_bos = root.find("add_bos_token");
  auto add_eos = root.find("add_eos_token");
  if ((add_bos && !add_bos->is_null()) || (add_eos && !add_eos->is_null())) {
    // Either key takes over from the template (transformers' Llama tokenizers rebuild the
    // post-processor from them); the one not given keeps what the template does.
    const bool template_bos = impl.post_processor.bos().has_value();
    const bool template_eos = impl.post_processor.eos().has_value();
    impl.add_bos = add_bos && !add_bos->is_null() ? add_bos->boolean() : template_bos;
    impl.add_eos = add_eos && !add_eos->is_null() ? add_eos->boolean() : template_eos;
    if (*impl.add_bos && !impl.bos_id)
      root.at("add_bos_token").fail("add_bos_token is true but no bos_token is set");
    if (*impl.add_eos && !impl.eos_id)
      root.at("add_eos_token").fail("add_eos_token is true but no eos_token is set");
  }
}

}  // namespace mantissa::text::detail
