// mantissa::text::Tokenizer against the `tokenizers` library: five small tokenizers trained
// by tests/fixtures/hf/make_tokenizer_fixtures.py (GPT-2, Llama 3, Llama 2 and Mistral layouts,
// and one with every Split behaviour), each with the ids and decodes `tokenizers` gives on
// every line of a multilingual text and on the whole text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/text/tokenizer.h"
#include "support/temp_dir.h"

namespace {

using mantissa::Error;
using mantissa::text::DecodeStream;
using mantissa::text::Tokenizer;

std::string fixture_dir(const std::string& name) {
  return std::string(MANTISSA_FIXTURES_DIR) + "/hf/tokenizers/" + name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

std::vector<int64_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

// The message of the Error that `fn` throws (fails the test when it throws none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no mantissa::Error thrown";
  return "";
}

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, EncodeAndDecodeMatchTokenizersOnEveryLine) {
  const Tokenizer tok = Tokenizer::from_directory(fixture_dir(GetParam()));
  const nlohmann::json expected = read_json(fixture_dir(GetParam()) + "/expected.json");
  EXPECT_EQ(tok.vocab_size(), expected["vocab_size"].get<int64_t>());
  const auto& cases = expected["cases"];
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE("text: " + text);
    const std::vector<int64_t> special = ids_of(c["ids_with_special"]);
    EXPECT_EQ(tok.encode(text, false), ids_of(c["ids"]));
    EXPECT_EQ(tok.encode(text, true), special);
    EXPECT_EQ(tok.decode(special, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(special, true), c["decoded_skip_special"].get<std::string>());
  }
}

TEST_P(TokenizerFixture, DecodeStreamConcatenationEqualsDecode) {
  const Tokenizer tok = Tokenizer::from_directory(fixture_dir(GetParam()));
  const nlohmann::json expected = read_json(fixture_dir(GetParam()) + "/expected.json");
  for (const auto& c : expected["cases"]) {
    SCOPED_TRACE("text: " + c["text"].get<std::string>());
    const std::vector<int64_t> ids = ids_of(c["ids_with_special"]);
    for (const bool skip : {false, true}) {
      DecodeStream stream(tok, skip);
      std::string streamed;
      for (const int64_t id : ids) streamed += stream.step(id);
      EXPECT_EQ(streamed, c[skip ? "decoded_skip_special" : "decoded"].get<std::string>())
          << "skip " << skip;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Hf, TokenizerFixture,
                         ::testing::Values("gpt2", "llama3", "llama2", "mistral", "variants"));

// The text of the fixture case that starts with `prefix`.
nlohmann::json case_starting(const std::string& name, const std::string& prefix) {
  const nlohmann::json expected = read_json(fixture_dir(name) + "/expected.json");
  for (const auto& c : expected["cases"])
    if (c["text"].get<std::string>().rfind(prefix, 0) == 0) return c;
  ADD_FAILURE() << "no case starts with " << prefix;
  return {};
}

TEST(TokenizerAddedTokens, SpecialAndAddedTokensAreSingleIds) {
  const Tokenizer gpt2 = Tokenizer::from_directory(fixture_dir("gpt2"));
  ASSERT_EQ(gpt2.token_to_id("<|endoftext|>"), 0);
  ASSERT_EQ(gpt2.token_to_id("[[CODE]]"), 1000);
  ASSERT_EQ(gpt2.token_to_id("<mask>"), 1001);
  EXPECT_TRUE(gpt2.is_special(0));
  EXPECT_FALSE(gpt2.is_special(1000));
  EXPECT_EQ(gpt2.id_to_token(1001), "<mask>");
  // The fixture line with the special tokens holds each as one id; "<mask>" (lstrip) took the
  // space before it, so no id of " " precedes it.
  const auto c = case_starting("gpt2", "Special:");
  const std::vector<int64_t> ids = ids_of(c["ids"]);
  for (const int64_t id : {0, 1000, 1001})
    EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1) << id;
  const auto mask = std::find(ids.begin(), ids.end(), 1001);
  EXPECT_NE(gpt2.id_to_token(*(mask - 1)), "Ġ");
  EXPECT_EQ(gpt2.encode("a <mask>b", false),
            (std::vector<int64_t>{*gpt2.token_to_id("a"), 1001, *gpt2.token_to_id("b")}));
  // Skipping special tokens drops "<|endoftext|>" and "<mask>" but keeps the added "[[CODE]]".
  const std::string skipped = gpt2.decode(ids, true);
  EXPECT_EQ(skipped.find("<|endoftext|>"), std::string::npos);
  EXPECT_NE(skipped.find("[[CODE]]"), std::string::npos);

  // Mistral's "[[CODE]]" is single_word: inside a word it is not the added token.
  const Tokenizer mistral = Tokenizer::from_directory(fixture_dir("mistral"));
  const int64_t code = *mistral.token_to_id("[[CODE]]");
  const auto alone = mistral.encode("x [[CODE]] y", false);
  EXPECT_EQ(std::count(alone.begin(), alone.end(), code), 1);
  const auto inside = mistral.encode("x[[CODE]]y", false);
  EXPECT_EQ(std::count(inside.begin(), inside.end(), code), 0);
  // Word characters as tokenizers counts them: combining marks, joiners, letter numbers and
  // other alphabetic symbols too (as `tokenizers` gives: no added token in these).
  for (const std::string text : {"e\u0301[[CODE]]", "\u200d[[CODE]]", "[[CODE]]\u0301",
                                 "\u2160[[CODE]]", "\u24b6[[CODE]]"}) {
    const auto ids = mistral.encode(text, false);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), code), 0) << text;
  }
  const auto spaced = mistral.encode("e\u0301 [[CODE]]", false);
  EXPECT_EQ(std::count(spaced.begin(), spaced.end(), code), 1);
}

TEST(TokenizerAddedTokens, ByteFallbackAndIgnoreMerges) {
  const Tokenizer llama2 = Tokenizer::from_directory(fixture_dir("llama2"));
  // "日" is not in the vocabulary: its three UTF-8 bytes become <0xE6> <0x97> <0xA5>.
  const auto ids = llama2.encode("日", false);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(llama2.id_to_token(ids[0]), "▁");
  EXPECT_EQ(llama2.id_to_token(ids[1]), "<0xE6>");
  EXPECT_EQ(llama2.id_to_token(ids[2]), "<0x97>");
  EXPECT_EQ(llama2.id_to_token(ids[3]), "<0xA5>");
  EXPECT_EQ(llama2.decode(ids), "日");
  // A byte sequence cut short decodes to one U+FFFD per byte; the stream waits for the rest.
  EXPECT_EQ(llama2.decode({ids[1], ids[2]}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  DecodeStream stream(llama2);
  EXPECT_EQ(stream.step(ids[1]), "");
  EXPECT_EQ(stream.step(ids[2]), "");
  EXPECT_EQ(stream.step(ids[3]), "日");

  // Llama 3 sets ignore_merges: " zzzz" is in its vocabulary, so it is one token although
  // the merges would not build it.
  const Tokenizer llama3 = Tokenizer::from_directory(fixture_dir("llama3"));
  EXPECT_EQ(llama3.encode(" zzzz", false), (std::vector<int64_t>{*llama3.token_to_id("Ġzzzz")}));
}

TEST(TokenizerConfig, BosAndEosFollowTheConfig) {
  const Tokenizer llama2 = Tokenizer::from_directory(fixture_dir("llama2"));
  EXPECT_EQ(llama2.bos_id(), 1);
  EXPECT_EQ(llama2.eos_id(), 2);
  const Tokenizer llama3 = Tokenizer::from_directory(fixture_dir("llama3"));
  EXPECT_EQ(llama3.bos_id(), llama3.token_to_id("<|begin_of_text|>"));
  EXPECT_EQ(llama3.eos_id(), llama3.token_to_id("<|end_of_text|>"));
  const Tokenizer gpt2 = Tokenizer::from_directory(fixture_dir("gpt2"));
  EXPECT_EQ(gpt2.bos_id(), 0);
  EXPECT_EQ(gpt2.eos_id(), 0);
  EXPECT_EQ(gpt2.encode("hi", true), gpt2.encode("hi", false));  // GPT-2 adds no BOS

  // Without a config: BOS from the template, no EOS.
  const Tokenizer bare = Tokenizer::from_files(fixture_dir("llama2") + "/tokenizer.json");
  EXPECT_EQ(bare.bos_id(), 1);
  EXPECT_EQ(bare.eos_id(), std::nullopt);

  // add_eos_token / add_bos_token replace the template.
  mantissa::testing::TempDir dir;
  const std::string json = fixture_dir("llama2") + "/tokenizer.json";
  const std::vector<int64_t> plain = llama2.encode("Hello world", false);
  write_text(
      dir.file("eos.json"),
      R"({"add_bos_token": true, "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>"})");
  std::vector<int64_t> both{1};
  both.insert(both.end(), plain.begin(), plain.end());
  both.push_back(2);
  EXPECT_EQ(Tokenizer::from_files(json, dir.file("eos.json")).encode("Hello world"), both);
  write_text(dir.file("nobos.json"), R"({"add_bos_token": false, "eos_token": "</s>"})");
  EXPECT_EQ(Tokenizer::from_files(json, dir.file("nobos.json")).encode("Hello world"), plain);
  // A config naming a token the vocabulary lacks is refused with the file and field.
  write_text(dir.file("bad.json"), R"({"add_eos_token": true, "eos_token": "<|im_end|>"})");
  const std::string msg = error_of([&] { Tokenizer::from_files(json, dir.file("bad.json")); });
  EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("eos_token"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'<|im_end|>' is not in the vocabulary"), std::string::npos) << msg;
}

// A copy of a fixture's tokenizer.json with `edit` applied, written into `dir`.
template <typename Edit>
std::string edited_tokenizer(const mantissa::testing::TempDir& dir, const std::string& name,
                             Edit&& edit) {
  nlohmann::json j = read_json(fixture_dir(name) + "/tokenizer.json");
  edit(j);
  const std::string path = dir.file(name + "_edited.json");
  write_text(path, j.dump());
  return path;
}

void expect_refused(const std::string& path, const std::vector<std::string>& parts) {
  const std::string msg = error_of([&] { Tokenizer::from_files(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  for (const std::string& part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << "want '" << part << "' in: " << msg;
}

TEST(TokenizerRefusal, UnsupportedComponentsAreNamedWithTheirPath) {
  mantissa::testing::TempDir dir;
  expect_refused(
      edited_tokenizer(
          dir, "llama3",
          [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace"; }),
      {"pre_tokenizer.pretokenizers[0].type", "unsupported pre-tokenizer type 'Whitespace'"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) {
                                    j["normalizer"] = {{"type", "NFKC"}};
                                  }),
                 {"normalizer.type", "unsupported normalizer type 'NFKC'"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) {
                                    j["decoder"] = {{"type", "WordPiece"}};
                                  }),
                 {"decoder.type", "'WordPiece'"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) {
                                    j["post_processor"] = {{"type", "RobertaProcessing"}};
                                  }),
                 {"post_processor.type", "'RobertaProcessing'"});
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j["model"]["type"] = "Unigram"; }),
                 {"model.type", "unsupported model type 'Unigram'"});
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j["model"]["dropout"] = 0.1; }),
                 {"model.dropout"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
                 {"model.continuing_subword_prefix"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) {
                                    j["truncation"] = {{"max_length", 8}};
                                  }),
                 {"truncation"});
  expect_refused(edited_tokenizer(dir, "variants",
                                  [](auto& j) {
                                    j["pre_tokenizer"]["pretokenizers"][1]["behavior"] = "Sideways";
                                  }),
                 {"pre_tokenizer.pretokenizers[1].behavior", "'Sideways'"});
  expect_refused(edited_tokenizer(dir, "llama3",
                                  [](auto& j) {
                                    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
                                        "(unclosed";
                                  }),
                 {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile"});
}

TEST(TokenizerRefusal, DamagedFilesGetClearErrors) {
  mantissa::testing::TempDir dir;
  // Missing file and directory.
  EXPECT_NE(error_of([&] {
              Tokenizer::from_files(dir.file("none.json"));
            }).find("none.json': no such file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tokenizer::from_directory(dir.str()); }).find("no tokenizer.json"),
            std::string::npos);
  // Truncated JSON.
  const std::string full = read_text(fixture_dir("gpt2") + "/tokenizer.json");
  write_text(dir.file("cut.json"), full.substr(0, full.size() / 2));
  expect_refused(dir.file("cut.json"), {"not valid JSON"});
  // Not an object, hostile nesting, a repeated key.
  write_text(dir.file("array.json"), "[1, 2]");
  expect_refused(dir.file("array.json"), {"expected an object"});
  write_text(dir.file("deep.json"), std::string(100000, '[') + std::string(100000, ']'));
  expect_refused(dir.file("deep.json"), {"nests"});
  write_text(dir.file("dup.json"), R"({"model": {}, "model": {}})");
  expect_refused(dir.file("dup.json"), {"appears twice"});
  // Fields of the wrong kind and inconsistent vocabularies.
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j["model"]["vocab"]["Ġthe"] = "x"; }),
                 {"model.vocab.Ġthe", "expected a whole number"});
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j["model"]["vocab"]["Ġthe"] = -4; }),
                 {"model.vocab.Ġthe"});
  expect_refused(edited_tokenizer(dir, "gpt2",
                                  [](auto& j) {
                                    j["model"]["merges"][0] = {"zz9", "q"};
                                  }),
                 {"model.merges[0]", "'zz9' is not in the vocabulary"});
  expect_refused(
      edited_tokenizer(dir, "llama2", [](auto& j) { j["model"]["merges"][0] = "a b c"; }),
      {"model.merges[0]", "two tokens separated by one space"});
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j["added_tokens"][1]["id"] = 5; }),
                 {"added_tokens[1]", "id 5"});
  expect_refused(edited_tokenizer(dir, "gpt2", [](auto& j) { j.erase("model"); }),
                 {"missing field 'model'"});
  // A hostile id would size the id table: refused before anything is allocated.
  expect_refused(
      edited_tokenizer(dir, "gpt2", [](auto& j) { j["model"]["vocab"]["Ġthe"] = 2147483647; }),
      {"model.vocab.Ġthe", "outside [0, 16777215]"});
  expect_refused(edited_tokenizer(dir, "llama2",
                                  [](auto& j) {
                                    j["post_processor"]["special_tokens"]["<s>"]["ids"][0] = 99999;
                                  }),
                 {"post_processor", "token id 99999"});
}

TEST(TokenizerFiles, EmptySubwordPrefixAndSuffixAreAccepted) {
  // GPT-2's own tokenizer.json writes "" for both: they change nothing.
  mantissa::testing::TempDir dir;
  const std::string path = edited_tokenizer(dir, "gpt2", [](auto& j) {
    j["model"]["continuing_subword_prefix"] = "";
    j["model"]["end_of_word_suffix"] = "";
  });
  const Tokenizer edited = Tokenizer::from_files(path);
  const Tokenizer original = Tokenizer::from_directory(fixture_dir("gpt2"));
  const std::string text = read_text(fixture_dir("test_text.txt"));
  EXPECT_EQ(edited.encode(text), original.encode(text));
}

TEST(TokenizerFiles, LongRunsRoundTrip) {
  // Long runs of one character class go through the split regexes (PCRE2's JIT stack) and the
  // merges; byte-level tokenizers give the text back exactly.
  for (const char* name : {"gpt2", "llama3"}) {
    const Tokenizer tok = Tokenizer::from_directory(fixture_dir(name));
    for (const std::string& text : {std::string(200000, ' ') + "x", std::string(100000, 'a'),
                                    std::string(50000, '\n') + "end", std::string(30000, '7')}) {
      SCOPED_TRACE(std::string(name) + ", " + std::to_string(text.size()) + " bytes");
      EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
    }
  }
  const Tokenizer llama2 = Tokenizer::from_directory(fixture_dir("llama2"));
  const std::string words = [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "the cat sat on the mat ";
    return s;
  }();
  EXPECT_EQ(llama2.decode(llama2.encode(words), true), words);
}

TEST(TokenizerRefusal, BadInputToEncodeAndDecode) {
  const Tokenizer tok = Tokenizer::from_directory(fixture_dir("gpt2"));
  EXPECT_NE(error_of([&] { tok.encode("ab\xFF"); }).find("not valid UTF-8 at byte 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tok.decode({5, tok.vocab_size()});
            }).find("cannot decode token id 1002"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode({-1}); }).find("cannot decode token id -1"),
            std::string::npos);
  EXPECT_EQ(tok.encode("", true), std::vector<int64_t>{});
  EXPECT_EQ(tok.decode({}), "");
}

}  // namespace
