// Mutation fuzzing of the readers of untrusted files (docs/design.md, "Untrusted files"):
// safetensors (load_safetensors, the checkpoint readers and the recorded hyperparameters), IDX
// (read_idx*, FashionMNIST), the --config JSON reader and the text corpus. Each valid seed file
// is damaged at random (bytes flipped, cut short, chunks inserted or removed, header lengths,
// dims and JSON numbers and strings swapped for extreme values) and every read must end in a
// result or a mantissa::Error with a message; any other exception is a finding (a crash or an
// out-of-bounds access fails the sanitizer build, scripts/sanitize.sh). A fixed seed, so a run
// is repeatable; MANTISSA_FUZZ_ITERATIONS (default 200 per format) runs more, e.g. under ASan.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "json_config.h"
#include "mantissa/core/error.h"
#include "mantissa/core/tensor.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/data/idx.h"
#include "mantissa/data/text_corpus.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/nn/linear.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/tensor_sizes.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "train_command.h"
#include "whole_number_options.h"

namespace mantissa {
namespace {

using Bytes = std::string;

int iterations() {
  const char* env = std::getenv("MANTISSA_FUZZ_ITERATIONS");
  return env && *env ? std::atoi(env) : 200;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  // One random damage of any byte string.
  Bytes mutate_bytes(Bytes b) {
    const int rounds = 1 + static_cast<int>(below(3));
    for (int r = 0; r < rounds; ++r) {
      switch (below(6)) {
        case 0:  // flip bits
          for (int i = 0, n = 1 + static_cast<int>(below(8)); i < n && !b.empty(); ++i)
            b[below(b.size())] ^= static_cast<char>(1u << below(8));
          break;
        case 1:  // set bytes to edge values
          for (int i = 0, n = 1 + static_cast<int>(below(4)); i < n && !b.empty(); ++i)
            b[below(b.size())] = static_cast<char>(
                pick<int>({0x00, 0xff, 0x7f, 0x80, '"', '{', '[', ']', '}', ',', ':', '\\'}));
          break;
        case 2:  // cut short
          b.resize(below(b.size() + 1));
          break;
        case 3: {  // insert random bytes
          Bytes chunk(1 + below(16), '\0');
          for (char& c : chunk) c = static_cast<char>(below(256));
          b.insert(below(b.size() + 1), chunk);
          break;
        }
        case 4:  // remove a chunk
          if (!b.empty()) {
            const size_t at = below(b.size());
            b.erase(at, 1 + below(std::min<size_t>(16, b.size() - at)));
          }
          break;
        case 5:  // repeat a chunk
          if (!b.empty()) {
            const size_t at = below(b.size());
            const Bytes chunk = b.substr(at, 1 + below(32));
            b.insert(below(b.size() + 1), chunk);
          }
          break;
      }
    }
    return b;
  }

  // Swaps one JSON number or string of `text` for an extreme or wrong one.
  std::string mutate_json(std::string text) {
    std::vector<std::pair<size_t, size_t>> numbers, strings;
    for (size_t i = 0; i < text.size();) {
      if (text[i] == '"') {
        size_t j = i + 1;
        while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
        strings.emplace_back(i, std::min(j + 1, text.size()) - i);
        i = j + 1;
      } else if ((text[i] >= '0' && text[i] <= '9') || text[i] == '-') {
        size_t j = i;
        while (j < text.size() &&
               std::string_view("0123456789.eE+-").find(text[j]) != std::string_view::npos)
          ++j;
        numbers.emplace_back(i, j - i);
        i = j;
      } else {
        ++i;
      }
    }
    static const std::vector<std::string> kNumbers = {"0",
                                                      "1",
                                                      "-1",
                                                      "2",
                                                      "7",
                                                      "4294967296",
                                                      "9223372036854775807",
                                                      "9223372036854775808",
                                                      "18446744073709551615",
                                                      "18446744073709551616",
                                                      "-9223372036854775809",
                                                      "1e308",
                                                      "1e400",
                                                      "-1e400",
                                                      "0.5",
                                                      "1.5",
                                                      "-0",
                                                      "1e-320",
                                                      "99999999999999999999",
                                                      "NaN",
                                                      "true",
                                                      "null",
                                                      "[]",
                                                      "{}",
                                                      "\"3\"",
                                                      "[1,2]"};
    static const std::vector<std::string> kStrings = {"\"F32\"",
                                                      "\"F64\"",
                                                      "\"BF16\"",
                                                      "\"F16\"",
                                                      "\"I8\"",
                                                      "\"U8\"",
                                                      "\"I16\"",
                                                      "\"I32\"",
                                                      "\"I64\"",
                                                      "\"BOOL\"",
                                                      "\"F8_E4M3\"",
                                                      "\"F8_E5M2\"",
                                                      "\"U64\"",
                                                      "\"XX\"",
                                                      "\"\"",
                                                      "\"__metadata__\"",
                                                      "\"dtype\"",
                                                      "\"shape\"",
                                                      "\"data_offsets\"",
                                                      "\"\\u0000\"",
                                                      "\"\\u001b[31m\"",
                                                      "\"\\ud800\"",
                                                      "\"\xff\xfe\"",
                                                      "1",
                                                      "[]",
                                                      "{}",
                                                      "null",
                                                      "\"{\\\"a\\\": [[[[[[1]]]]]]}\"",
                                                      "\"" + std::string(300, 'a') + "\"",
                                                      "\"nan\"",
                                                      "\"inf\"",
                                                      "\"-1\"",
                                                      "\"1e400\"",
                                                      "\"99999999999999999999\""};
    const bool number = !numbers.empty() && (strings.empty() || below(2) == 0);
    if (number) {
      const auto [at, len] = pick(numbers);
      text.replace(at, len, pick(kNumbers));
    } else if (!strings.empty()) {
      const auto [at, len] = pick(strings);
      text.replace(at, len, pick(kStrings));
    }
    return text;
  }

 private:
  std::mt19937_64 rng_;
};

// What a hostile input did: errors as expected, and anything else (the findings).
struct Tally {
  int runs = 0, errors = 0;
  std::vector<std::string> findings;

  void run(const std::string& what, const Bytes& input, const std::function<void()>& read) {
    ++runs;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      read();
    } catch (const Error& e) {
      ++errors;
      if (std::string_view(e.what()).empty()) findings.push_back(what + ": an empty message");
    } catch (const CLI::ParseError& e) {
      ++errors;  // the command line's own error for a --config mistake (main.cpp reports it)
    } catch (const std::invalid_argument& e) {
      ++errors;  // CLI11's switch conversion; main.cpp turns it into a named error
    } catch (const std::exception& e) {
      std::string hex;
      for (size_t i = 0; i < std::min<size_t>(input.size(), 64); ++i)
        hex += fmt::format("{:02x}", static_cast<unsigned char>(input[i]));
      findings.push_back(fmt::format("{}: {} ({}); input of {} bytes starting {}", what, e.what(),
                                     typeid(e).name(), input.size(), hex));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 5) findings.push_back(fmt::format("{}: took {:.1f} s", what, s));
  }

  void expect_clean() {
    for (size_t i = 0; i < std::min<size_t>(findings.size(), 20); ++i) ADD_FAILURE() << findings[i];
    EXPECT_TRUE(findings.empty()) << findings.size() << " of " << runs << " reads";
  }
};

// The safetensors file's header text and data buffer, rebuilt with a consistent length.
Bytes with_header(const std::string& header, const Bytes& buffer) {
  Bytes b(8, '\0');
  for (int i = 0; i < 8; ++i)
    b[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return b + header + buffer;
}

TEST(ReaderFuzz, SafetensorsAndCheckpoints) {
  testing::TempDir dir;
  const std::string seed_path = dir.file("seed.safetensors");
  Tensor w = empty({3, 2}, kFloat32);
  for (int64_t i = 0; i < 6; ++i) w.data<float>()[i] = 0.25f * static_cast<float>(i);
  Tensor b = empty({3}, kFloat32);
  for (int64_t i = 0; i < 3; ++i) b.data<float>()[i] = 1.0f;
  Tensor steps = empty({2}, kFloat64);
  steps.data<double>()[0] = 1.5;
  steps.data<double>()[1] = 0.5;
  io::save_safetensors(
      seed_path,
      {{"model.weight", w},
       {"model.bias", b},
       {"trainer.step_losses", steps},
       {"other.bf16", empty({2, 2}, kBFloat16)},
       {"other.codes", empty({5}, kUInt8)},
       {"other.empty", empty({0, 4}, kInt64)}},
      {{"hyper_parameters", R"({"model": "mlp", "hidden": 32, "lr": 0.001})"}, {"format", "pt"}});
  const Bytes seed = read_file(seed_path);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i)
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(seed[i])) << (8 * i);
  const std::string header = seed.substr(8, header_len);
  const Bytes buffer = seed.substr(8 + header_len);

  // The seed itself is read whole: the damage below is what makes a file fail.
  ASSERT_EQ(io::load_safetensors(seed_path).tensors.size(), 6u);
  nn::Linear seed_model(2, 3);
  ASSERT_NO_THROW(train::load_checkpoint_weights(seed_model, seed_path));

  // An MLP 784-16-10's weights with the hyperparameters `mantissa train` records.
  const io::NamedTensors mlp_weights = {{"model.net.0.weight", zeros({16, 784})},
                                        {"model.net.0.bias", zeros({16})},
                                        {"model.net.2.weight", zeros({10, 16})},
                                        {"model.net.2.bias", zeros({10})}};
  recipes::TrainOptions mlp_options;
  mlp_options.hidden = "16";
  const std::string hparams = recipes::image_model_hparams(mlp_options).dump();

  Fuzzer fuzz(20261127);
  Tally tally;
  const std::string path = dir.file("f.safetensors");
  for (int it = 0; it < iterations(); ++it) {
    Bytes bytes;
    switch (fuzz.below(4)) {
      case 0:
        bytes = fuzz.mutate_bytes(seed);
        break;
      case 1: {  // a header length that lies
        bytes = seed;
        const uint64_t len = fuzz.pick<uint64_t>(
            {0, 1, 7, header_len - 1, header_len + 1, seed.size() - 8, seed.size() - 7,
             uint64_t{1} << 32, uint64_t{1} << 63, ~uint64_t{0}, io::kSafetensorsMaxHeaderBytes,
             io::kSafetensorsMaxHeaderBytes + 1});
        for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(len >> (8 * i));
        break;
      }
      case 2:  // one header value swapped, the length kept consistent
        bytes = with_header(fuzz.mutate_json(fuzz.below(3) ? header : fuzz.mutate_json(header)),
                            buffer);
        break;
      case 3:  // header damaged as bytes, the length kept consistent
        bytes = with_header(fuzz.mutate_bytes(header),
                            fuzz.below(4) ? buffer : fuzz.mutate_bytes(buffer));
        break;
    }
    if (fuzz.below(4) == 0) {
      // A well-formed file whose recorded hyperparameters are damaged, as eval reads them.
      const std::string hp =
          fuzz.below(2) ? fuzz.mutate_json(fuzz.mutate_json(hparams)) : fuzz.mutate_bytes(hparams);
      io::save_safetensors(path, mlp_weights, {{"hyper_parameters", hp}});
      bytes = read_file(path);
    }
    write_file(path, bytes);
    tally.run("apply_model_hparams", bytes, [&] {
      const io::SafetensorsHeader h = train::read_checkpoint_header(path);
      recipes::TensorShapes shapes;
      for (const io::SafetensorsTensorInfo& t : h.tensors) shapes[t.name] = t.shape;
      recipes::TrainOptions o;
      recipes::GptOptions g;
      recipes::apply_model_hparams(
          recipes::recorded_model_hparams(h, path, "eval"), path, shapes,
          [](const std::string&) { return false; }, o, g);
    });
    tally.run("load_safetensors", bytes, [&] { io::load_safetensors(path); });
    tally.run("load_checkpoint_file", bytes, [&] { train::load_checkpoint_file(path); });
    tally.run("recorded_model_hparams", bytes, [&] {
      const io::SafetensorsHeader h = train::read_checkpoint_header(path);
      recipes::recorded_model_hparams(h, path, "eval");
    });
    tally.run("load_checkpoint_weights", bytes, [&] {
      nn::Linear model(2, 3);
      train::load_checkpoint_weights(model, path);
    });
  }
  tally.expect_clean();
  EXPECT_GT(tally.errors, tally.runs / 4);  // most damaged files are refused
}

TEST(ReaderFuzz, IdxAndFashionMnist) {
  testing::TempDir dir;
  Tensor images = empty({2, 28, 28}, kUInt8);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  Tensor labels = empty({2}, kUInt8);
  labels.data<uint8_t>()[0] = 3;
  labels.data<uint8_t>()[1] = 9;
  std::vector<std::pair<Bytes, bool>> seeds;  // bytes, images
  for (const bool gz : {false, true}) {
    data::write_idx(dir.file("i"), images, gz);
    seeds.emplace_back(read_file(dir.file("i")), true);
    data::write_idx(dir.file("l"), labels, gz);
    seeds.emplace_back(read_file(dir.file("l")), false);
  }
  Fuzzer fuzz(7);
  Tally tally;
  const std::string root = dir.file("fm");
  std::filesystem::create_directories(root);
  write_file(root + "/train-images-idx3-ubyte", seeds[0].first);
  write_file(root + "/train-labels-idx1-ubyte", seeds[1].first);
  ASSERT_EQ(data::FashionMNIST(root, true).size(), 2);
  for (int it = 0; it < iterations(); ++it) {
    const auto& [seed, is_images] = fuzz.pick(seeds);
    const bool gz = seed.size() > 1 && static_cast<unsigned char>(seed[0]) == 0x1f;
    Bytes bytes = seed;
    if (!gz && fuzz.below(2)) {  // the header's fields: ndim and dims
      if (fuzz.below(2)) {
        bytes[3] = static_cast<char>(fuzz.pick<int>({0, 1, 2, 3, 4, 5, 16, 255}));
      } else {
        const size_t dims = static_cast<unsigned char>(seed[3]);
        const size_t at = 4 + 4 * fuzz.below(dims);
        const uint32_t v = fuzz.pick<uint32_t>(
            {0, 1, 27, 29, 0xffffffffu, 0x80000000u, 0x10000u, 0x7fffffffu, 1u << 20});
        for (int s = 0; s < 4; ++s) bytes[at + s] = static_cast<char>(v >> (24 - 8 * s));
      }
    } else {
      bytes = fuzz.mutate_bytes(seed);
    }
    const std::string path = dir.file(gz ? "f.gz" : "f");
    write_file(path, bytes);
    tally.run("read_idx", bytes, [&] { data::read_idx(path); });
    tally.run("read_idx_images", bytes, [&] { data::read_idx_images(path); });
    tally.run("read_idx_labels", bytes, [&] { data::read_idx_labels(path); });
    // The data set, one of its two files damaged.
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    const std::string suffix = gz ? ".gz" : "";
    write_file(root + "/train-images-idx3-ubyte" + suffix,
               is_images ? bytes : seeds[gz ? 2 : 0].first);
    write_file(root + "/train-labels-idx1-ubyte" + suffix,
               is_images ? seeds[gz ? 3 : 1].first : bytes);
    tally.run("FashionMNIST", bytes, [&] { data::FashionMNIST(root, true); });
  }
  tally.expect_clean();
  EXPECT_GT(tally.errors, tally.runs / 4);
}

TEST(ReaderFuzz, TextCorpus) {
  testing::TempDir dir;
  const Bytes seed = "the quick brown fox jumps over the lazy dog\nHello, world! \xc3\xa9\n";
  Fuzzer fuzz(11);
  Tally tally;
  const std::string path = dir.file("corpus.txt");
  for (int it = 0; it < iterations(); ++it) {
    const Bytes bytes = fuzz.mutate_bytes(fuzz.below(4) ? seed : seed + seed + seed);
    write_file(path, bytes);
    const double val = fuzz.pick<double>({0.1, 0.5, 0.9, 1e-9, 0.999999});
    const uint64_t max_bytes = fuzz.pick<uint64_t>({1 << 20, 16, 64, 1});
    const int64_t context = fuzz.pick<int64_t>({1, 2, 7, 16, 64, 1 << 20});
    tally.run("TextCorpus", bytes, [&] {
      const data::TextCorpus corpus(path, val, max_bytes);
      Generator gen(3);
      const auto [x, y] = corpus.batch(true, 2, context, &gen);
      // Every target is the byte after its input: the windows are the file's own text.
      const std::string& t = corpus.train_text();
      for (int64_t i = 0; i + 1 < context; ++i)
        ASSERT_EQ(x.data<int64_t>()[i + 1], y.data<int64_t>()[i]);
      ASSERT_LE(static_cast<int64_t>(t.size()), static_cast<int64_t>(bytes.size()));
      corpus.sequential_batches(false, 3, context, 4);
    });
  }
  tally.expect_clean();
}

TEST(ReaderFuzz, JsonConfig) {
  testing::TempDir dir;
  const std::string seed =
      R"({"model": "mlp", "max-steps": 2, "lr": 0.001, "precision": "bf16-mixed",)"
      R"( "early_stopping_monitor": "val_loss", "batch-size": 64, "fp8-exclude": ["net.0"],)"
      R"( "seed": 7, "hidden": 32, "limit-train-batches": 1.0, "epochs": 1})";
  Fuzzer fuzz(5);
  Tally tally;
  const std::string path = dir.file("run.json");
  const auto parse_train = [&] {
    CLI::App cli{"mantissa"};
    cli.require_subcommand(1);
    app::add_train_command(cli);
    app::add_config_option(cli);
    app::read_whole_numbers_in_decimal(cli);
    cli.get_subcommand("train")->callback([] {});
    std::vector<std::string> args = {path, "--config", "train"};  // CLI11 takes them reversed
    cli.parse(args);
  };
  write_file(path, seed);
  ASSERT_NO_THROW(parse_train());
  for (int it = 0; it < iterations(); ++it) {
    const std::string text =
        fuzz.below(2) ? fuzz.mutate_json(fuzz.mutate_json(seed)) : fuzz.mutate_bytes(seed);
    write_file(path, text);
    tally.run("JsonConfig::from_config", text, [&] {
      std::istringstream in(text);
      app::JsonConfig("train").from_config(in);
    });
    // As `mantissa train --config FILE` parses it (main.cpp), the run itself left out.
    tally.run("train --config", text, parse_train);
  }
  tally.expect_clean();
}

}  // namespace
}  // namespace mantissa
