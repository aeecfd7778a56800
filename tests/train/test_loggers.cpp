// CSVLogger and TensorBoardLogger: file contents checked byte by byte / field by field; the
// TensorBoard file is decoded here by an independent reader (framing, CRCs, protobuf fields).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <type_traits>

#include "mantissa/train/report/logger.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "train/report/tfrecord.h"

namespace mantissa::train {
namespace {

using mantissa::testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(TfRecord, Crc32cKnownVectors) {
  // Check values of CRC-32C (RFC 3720 appendix B.4 and the common "123456789" check).
  EXPECT_EQ(tfrecord::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(tfrecord::crc32c("", 0), 0x00000000u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(tfrecord::crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(tfrecord::crc32c(ones.data(), 32), 0x62A8AB43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(tfrecord::crc32c(inc.data(), 32), 0x46DD794Eu);
}

TEST(TfRecord, MaskFormula) {
  // masked = rotate_right(crc, 15) + 0xa282ead8 (mod 2^32)
  EXPECT_EQ(tfrecord::mask_crc(0), 0xa282ead8u);
  EXPECT_EQ(tfrecord::mask_crc(1), (1u << 17) + 0xa282ead8u);
  EXPECT_EQ(tfrecord::mask_crc(0x8000u), 1u + 0xa282ead8u);
  EXPECT_EQ(tfrecord::mask_crc(0xE3069283u),
            ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST(TfRecord, FramingBytes) {
  const std::string rec = tfrecord::frame_record("abc");
  ASSERT_EQ(rec.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(rec.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(rec.substr(12, 3), "abc");
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, rec.data() + 8, 4);
  std::memcpy(&data_crc, rec.data() + 15, 4);
  EXPECT_EQ(len_crc, tfrecord::mask_crc(tfrecord::crc32c(rec.data(), 8)));
  EXPECT_EQ(data_crc, tfrecord::mask_crc(tfrecord::crc32c("abc", 3)));
}

// ---- an independent protobuf reader for the fields TensorBoard uses ----
struct Field {
  int number = 0;
  int wire = 0;
  uint64_t varint = 0;  // wire 0, also fixed64/fixed32 bits
  std::string bytes;    // wire 2
};

uint64_t read_varint(const std::string& s, size_t& i) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    EXPECT_LT(i, s.size());
    if (i >= s.size()) return v;
    const auto b = static_cast<uint8_t>(s[i++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

std::vector<Field> parse_message(const std::string& s) {
  std::vector<Field> out;
  size_t i = 0;
  while (i < s.size()) {
    const uint64_t key = read_varint(s, i);
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.varint = read_varint(s, i);
    } else if (f.wire == 1 || f.wire == 5) {
      const size_t n = f.wire == 1 ? 8 : 4;
      std::memcpy(&f.varint, s.data() + i, n);
      i += n;
    } else if (f.wire == 2) {
      const uint64_t n = read_varint(s, i);
      f.bytes = s.substr(i, n);
      i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire;
      return out;
    }
    out.push_back(f);
  }
  EXPECT_EQ(i, s.size());
  return out;
}

std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> recs;
  size_t i = 0;
  while (i < file.size()) {
    uint64_t len;
    uint32_t len_crc, data_crc;
    EXPECT_LE(i + 12, file.size());
    std::memcpy(&len, file.data() + i, 8);
    std::memcpy(&len_crc, file.data() + i + 8, 4);
    EXPECT_EQ(len_crc, tfrecord::mask_crc(tfrecord::crc32c(file.data() + i, 8)));
    EXPECT_LE(i + 12 + len + 4, file.size());
    const std::string data = file.substr(i + 12, len);
    std::memcpy(&data_crc, file.data() + i + 12 + len, 4);
    EXPECT_EQ(data_crc, tfrecord::mask_crc(tfrecord::crc32c(data.data(), data.size())));
    recs.push_back(data);
    i += 12 + len + 4;
  }
  return recs;
}

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(uint64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(TensorBoardLogger, EventFileDecodes) {
  TempDir dir;
  const double before = static_cast<double>(std::time(nullptr)) - 1;
  TensorBoardLogger logger(dir.str(), "tb");
  EXPECT_EQ(logger.log_dir(), dir.str() + "/tb/version_0");
  const std::string name = std::filesystem::path(logger.event_file()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  logger.log_metrics({{"train_loss", 0.25}, {"lr", 1e-3}}, 7);
  logger.log_metrics({{"val_acc", 0.875}}, 300);
  logger.finalize();

  const auto recs = read_records(slurp(logger.event_file()));
  ASSERT_EQ(recs.size(), 3u);
  // Record 0: wall_time (field 1, double) and file_version (field 3) = "brain.Event:2".
  auto e0 = parse_message(recs[0]);
  ASSERT_EQ(e0.size(), 2u);
  EXPECT_EQ(e0[0].number, 1);
  EXPECT_EQ(e0[0].wire, 1);
  EXPECT_GE(as_double(e0[0].varint), before);
  EXPECT_LE(as_double(e0[0].varint), before + 60);
  EXPECT_EQ(e0[1].number, 3);
  EXPECT_EQ(e0[1].bytes, "brain.Event:2");

  // Record 1: step 7 (field 2 varint) and summary (field 5) with two values in tag order.
  auto e1 = parse_message(recs[1]);
  ASSERT_EQ(e1.size(), 3u);
  EXPECT_EQ(e1[1].number, 2);
  EXPECT_EQ(e1[1].varint, 7u);
  EXPECT_EQ(e1[2].number, 5);
  auto values = parse_message(e1[2].bytes);
  ASSERT_EQ(values.size(), 2u);
  const std::pair<const char*, float> want[] = {{"lr", 1e-3f}, {"train_loss", 0.25f}};
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(values[k].number, 1);
    auto v = parse_message(values[k].bytes);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].number, 1);
    EXPECT_EQ(v[0].bytes, want[k].first);
    EXPECT_EQ(v[1].number, 2);
    EXPECT_EQ(v[1].wire, 5);  // fixed32 float
    EXPECT_EQ(as_float(v[1].varint), want[k].second);
  }
  auto e2 = parse_message(recs[2]);
  EXPECT_EQ(e2[1].varint, 300u);  // multi-byte varint
  auto v2 = parse_message(parse_message(parse_message(e2[2].bytes)[0].bytes)[1].bytes);
  (void)v2;
  auto val = parse_message(parse_message(e2[2].bytes)[0].bytes);
  EXPECT_EQ(val[0].bytes, "val_acc");
  EXPECT_EQ(as_float(val[1].varint), 0.875f);
}

TEST(CSVLogger, VersionsAndRewriteOnNewColumns) {
  TempDir dir;
  std::filesystem::create_directories(dir.str() + "/logs/version_3");
  std::filesystem::create_directories(dir.str() + "/logs/version_x");  // ignored
  CSVLogger logger(dir.str(), "logs");
  EXPECT_EQ(logger.log_dir(), dir.str() + "/logs/version_4");
  logger.log_metrics({{"train_loss", 0.5}}, 0);
  EXPECT_EQ(slurp(logger.metrics_path()), "train_loss,step\n0.5,0\n");
  logger.log_metrics({{"train_loss", 0.25}}, 1);
  EXPECT_EQ(slurp(logger.metrics_path()), "train_loss,step\n0.5,0\n0.25,1\n");
  // A new metric widens the header; earlier rows get an empty cell.
  logger.log_metrics({{"val_acc", 0.875}, {"epoch", 0}}, 1);
  EXPECT_EQ(slurp(logger.metrics_path()),
            "epoch,train_loss,val_acc,step\n,0.5,,0\n,0.25,,1\n0,,0.875,1\n");
  logger.log_metrics({{"train_loss", 0.1}}, 2);
  logger.finalize();
  EXPECT_EQ(slurp(logger.metrics_path()),
            "epoch,train_loss,val_acc,step\n,0.5,,0\n,0.25,,1\n0,,0.875,1\n,0.1,,2\n");
  mantissa::testing::expect_error(
      [&] {
        logger.log_metrics({{"step", 1}}, 3);
      },
      {"CSVLogger", "'step' is reserved"});
  // Explicit version.
  CSVLogger fixed(dir.str(), "logs", 1);
  EXPECT_EQ(fixed.log_dir(), dir.str() + "/logs/version_1");
  EXPECT_EQ(next_version(dir.str(), "logs"), 5);
}

TEST(CSVLogger, HparamsYaml) {
  TempDir dir;
  CSVLogger logger(dir.str());
  EXPECT_EQ(logger.log_dir(), dir.str() + "/lightning_logs/version_0");
  logger.log_hyperparams({{"lr", 0.001}, {"precision", "bf16-mixed"}});
  logger.log_hyperparams({{"hidden", {256, 128}}, {"opt", {{"name", "adamw"}, {"wd", 0.01}}}});
  EXPECT_EQ(slurp(logger.log_dir() + "/hparams.yaml"),
            "hidden:\n  - 256\n  - 128\nlr: 0.001\nopt:\n  name: \"adamw\"\n  wd: 0.01\n"
            "precision: \"bf16-mixed\"\n");
  mantissa::testing::expect_error([&] { logger.log_hyperparams(nlohmann::json::array()); },
                                  {"must be a JSON object"});
  EXPECT_EQ(to_yaml({{"a b", true}, {"x", nullptr}}), "\"a b\": true\nx: null\n");
}

// Keys that YAML 1.1 (PyYAML's safe_load, as Lightning reads hparams.yaml) resolves to a bool,
// null, number or date are quoted: unquoted, `yes` and `true` both read back as True (one value
// lost) and `1`, `0x10` as ints. Keys YAML reads as the same string stay plain.
TEST(CSVLogger, HparamsYamlQuotesKeysYamlReadsAsOtherTypes) {
  TempDir dir;
  CSVLogger logger(dir.str());
  logger.log_hyperparams(
      {{"yes", "yes"}, {"true", 3}, {"1", "one"}, {"null", 2}, {"off", 4}, {"0x10", 5}});
  EXPECT_EQ(slurp(logger.log_dir() + "/hparams.yaml"),
            "\"0x10\": 5\n\"1\": \"one\"\n\"null\": 2\n\"off\": 4\n\"true\": 3\n"
            "\"yes\": \"yes\"\n");
  for (const char* key :
       {"y",    "Y",     "n",    "No",         "NO",   "True", "FALSE", "On",     "oFF", "Null",
        "~",    "",      ".inf", "-.inf",      ".NaN", "1e3",  "1.5",   "-1",     "+1",  "0b101",
        "0o17", "1_000", "1:30", "2024-01-01", "<<",   "=",    "-x",    ".hidden"}) {
    EXPECT_EQ(to_yaml({{key, 1}}), nlohmann::json(key).dump() + ": 1\n") << key;
  }
  for (const char* key : {"lr", "_target_", "model.lr", "lora-rank", "yes_no", "nope", "onx", "n2",
                          "x1e3", "null_value"}) {
    EXPECT_EQ(to_yaml({{key, 1}}), std::string(key) + ": 1\n") << key;
  }
  // Nested keys follow the same rule.
  EXPECT_EQ(to_yaml({{"opt", {{"on", true}, {"wd", 0.01}}}}), "opt:\n  \"on\": true\n  wd: 0.01\n");
}

// hparams.yaml is written whole or not at all: a write that fails (here a file size limit, as a
// full disk) is an error naming the file, and the earlier hparams.yaml keeps its content (an
// unchecked ofstream left it empty or cut, without a word).
template <typename Logger>
void expect_failed_hparams_write_keeps_the_file(const char* owner) {
  TempDir dir;
  Logger logger(dir.str());
  logger.log_hyperparams({{"lr", 0.001}});
  const std::string path = logger.log_dir() + "/hparams.yaml";
  ASSERT_EQ(slurp(path), "lr: 0.001\n");
  {
    mantissa::testing::FileSizeLimit full(4);
    mantissa::testing::expect_error(
        [&] {
          logger.log_hyperparams({{"precision", "bf16-mixed"}});
        },
        {owner, "hparams.yaml' is left as it was"});
  }
  EXPECT_EQ(slurp(path), "lr: 0.001\n");
  // hparams.yaml, and the TensorBoard logger's event file: no temporary file left behind.
  const std::ptrdiff_t files = std::is_same_v<Logger, TensorBoardLogger> ? 2 : 1;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(logger.log_dir()),
                          std::filesystem::directory_iterator()),
            files);
}

TEST(TensorBoardLogger, FailedHparamsWriteKeepsTheFile) {
  expect_failed_hparams_write_keeps_the_file<TensorBoardLogger>("TensorBoardLogger");
}

TEST(CSVLogger, FailedHparamsWriteKeepsTheFile) {
  expect_failed_hparams_write_keeps_the_file<CSVLogger>("CSVLogger");
}

}  // namespace
}  // namespace mantissa::train
