// libFuzzer target: bytes as a tokenizer.json (mantissa/text/tokenizer.h). A file that loads
// then encodes a few short texts (ASCII, accents, CJK, emoji, spaces, special-token look-alikes)
// and decodes the ids back, at once and streamed, and decodes the first ids of its vocabulary.
// A file the loader does not support must end in mantissa::Error; anything else (a crash, a
// sanitizer report, another exception, a leak, a hang) is a finding. docs/fuzzing.md runs it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input_file.h"
#include "mantissa/core/error.h"
#include "mantissa/text/tokenizer.h"

namespace {

using mantissa::text::Tokenizer;

constexpr std::string_view kTexts[] = {
    "Hello world! It's 2026, isn't it?",
    "  caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\n\tend ",
    "<s>[INST] <|endoftext|> </s>",
    "",
};

void exercise(const Tokenizer& tokenizer) {
  for (std::string_view text : kTexts) {
    for (bool special : {true, false}) {
      const std::vector<int64_t> ids = tokenizer.encode(text, special);
      (void)tokenizer.decode(ids, /*skip_special_tokens=*/false);
      (void)tokenizer.decode(ids, /*skip_special_tokens=*/true);
      try {
        mantissa::text::DecodeStream stream(tokenizer);
        for (int64_t id : ids) (void)stream.step(id);
      } catch (const mantissa::Error&) {  // a decoder that cannot stream says so
      }
    }
  }
  const int64_t n = std::min<int64_t>(tokenizer.vocab_size(), 64);
  std::vector<int64_t> first(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    first[static_cast<size_t>(id)] = id;
    if (const auto token = tokenizer.id_to_token(id)) (void)tokenizer.token_to_id(*token);
    (void)tokenizer.is_special(id);
  }
  (void)tokenizer.decode(first);
  (void)tokenizer.bos_id();
  (void)tokenizer.eos_id();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mantissa::fuzz::InputFile input("tokenizer.json");
  const std::string& path = input.write(data, size);
  try {
    exercise(Tokenizer::from_files(path));
  } catch (const mantissa::Error&) {
  }
  return 0;
}
