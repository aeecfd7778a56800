// Damaged model directories: every load of a config.json, an index or a weights file damaged at
// random ends in a model or a mantissa::Error, never a crash (as ReaderFuzz does for the other
// readers). Fixed seeds; MANTISSA_FUZZ_ITERATIONS (default 60 per file) runs more.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/models/hf_loader.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"

namespace mantissa {
namespace {

int iterations() {
  const char* env = std::getenv("MANTISSA_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : 60;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Flips, cuts, inserts or swaps a few bytes of `s`.
std::string damage(std::string s, Generator& g) {
  const int kind = static_cast<int>(g.below(4));
  const auto pos = [&] { return s.empty() ? size_t{0} : static_cast<size_t>(g.below(s.size())); };
  if (kind == 0) {
    for (int i = 0, n = 1 + static_cast<int>(g.below(8)); i < n && !s.empty(); ++i)
      s[pos()] = static_cast<char>(g.below(256));
  } else if (kind == 1) {
    s.resize(pos());
  } else if (kind == 2) {
    static const char* tokens[] = {"-1", "1e300", "null", "[", "{", "\"", "99999999999", "0"};
    s.insert(pos(), tokens[g.below(8)]);
  } else {
    const size_t a = pos(), b = pos();
    if (!s.empty()) std::swap(s[a], s[b]);
  }
  return s;
}

void fuzz_file(const std::string& fixture, const std::string& file, uint64_t seed) {
  Generator g(seed);
  const std::string original = read_all(testing::hf_fixture_dir(fixture) + "/" + file);
  int loaded = 0, refused = 0;
  for (int i = 0; i < iterations(); ++i) {
    testing::TempDir tmp;
    testing::copy_hf_fixture(fixture, tmp.str());
    std::ofstream(tmp.file(file), std::ios::binary | std::ios::trunc) << damage(original, g);
    try {
      models::load_hf_model(tmp.str());
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0) << fixture << "/" << file;
  EXPECT_EQ(loaded + refused, iterations());
}

TEST(HfFuzz, DamagedConfigIsLoadedOrRefused) {
  fuzz_file("llama_tied_llama3", "config.json", 1);
  fuzz_file("gpt2", "config.json", 2);
}

TEST(HfFuzz, DamagedIndexIsLoadedOrRefused) {
  fuzz_file("llama_linear_sharded", "model.safetensors.index.json", 3);
}

TEST(HfFuzz, DamagedWeightsAreLoadedOrRefused) {
  fuzz_file("qwen2_bf16", "model.safetensors", 4);
  fuzz_file("llama_linear_sharded", "model-00001-of-00009.safetensors", 5);
}

}  // namespace
}  // namespace mantissa
