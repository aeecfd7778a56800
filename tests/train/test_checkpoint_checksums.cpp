// The checksums a checkpoint file stores of its run state and tensors (src/train/
// checkpoint_checksums.h): a flipped digit of the RNG state passed every other check and
// silently ended exact reproducibility, and a flipped bit of a weight loaded as another weight.
// Both are refused naming what is damaged; a file without checksums loads with a warning.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "io/safetensors_fixtures.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"
#include "train/checkpoint/checkpoint_checksums.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::TempDir;
using testing::flat_params;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

struct ChecksumRun {
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<TinyModule> module;
};

ChecksumRun run(int64_t steps) {
  TrainerOptions o = quiet_options("32-true");
  o.seed = 7;
  o.max_steps = steps;
  o.max_epochs = steps == 0 ? 0 : -1;
  TinyOptions t;
  t.adamw = true;
  t.lr = 0.01;
  ChecksumRun r{std::make_unique<Trainer>(o), std::make_unique<TinyModule>(t)};
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 3);
  r.trainer->fit(*r.module, loader);
  return r;
}

// A checkpoint after 2 steps, written as ModelCheckpoint writes it.
std::string written_checkpoint(const TempDir& dir) {
  ChecksumRun a = run(2);
  const std::string path = dir.file("ck.safetensors");
  save_checkpoint_file(path, collect_checkpoint(*a.trainer));
  return path;
}

std::string crc_of(const void* data, size_t n) {
  return fmt::format("{:08x}",
                     static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), n)));
}

// A tensor's checksum: the CRC-32 of "F32 [rows,cols] " followed by its bytes.
std::string tensor_crc_of(const Tensor& t) {
  std::string text =
      fmt::format("{} [{}] ", io::safetensors_dtype_name(t.dtype()), fmt::join(t.shape(), ","));
  text.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return crc_of(text.data(), text.size());
}

TEST(CheckpointChecksums, EveryTensorAndTrainerFieldHasItsCrc32) {
  TempDir dir;
  const io::SafetensorsFile file = io::load_safetensors(written_checkpoint(dir));
  const nlohmann::json sums = nlohmann::json::parse(file.metadata.at("mantissa.checksums"));
  EXPECT_EQ(sums.at("algorithm"), "crc32");
  ASSERT_EQ(sums.at("tensors").size(), file.tensors.size());
  for (const auto& [name, t] : file.tensors)
    EXPECT_EQ(sums.at("tensors").at(name), tensor_crc_of(t)) << name;
  const nlohmann::json meta = nlohmann::json::parse(file.metadata.at(kCheckpointMetadataKey));
  ASSERT_EQ(sums.at("trainer").size(), meta.size());
  const std::string rng = nlohmann::json(meta.at("rng")).dump();
  EXPECT_EQ(sums.at("trainer").at("rng"), crc_of(rng.data(), rng.size()));
}

TEST(CheckpointChecksums, AFlippedDigitOfTheRngStateIsRefusedNamingIt) {
  TempDir dir;
  const std::string path = written_checkpoint(dir);
  // "rng":"<n> <word> ...": the last digit of its second number, one higher or lower (the state
  // still parses: only the checksum can tell).
  io::testing::Bytes bytes = io::testing::read_bytes(path);
  const std::string text(bytes.begin(), bytes.end());
  const size_t rng = text.find(R"(\"rng\":\")");
  ASSERT_NE(rng, std::string::npos);
  uint8_t& digit = bytes[text.find(' ', text.find(' ', rng) + 1) - 1];
  ASSERT_TRUE(digit >= '0' && digit <= '9');
  digit = digit == '9' ? '8' : digit + 1;
  io::testing::write_bytes(path, bytes);
  ChecksumRun b = run(0);
  const std::vector<float> before = flat_params(*b.module);
  const std::string state = default_generator().state();
  const std::string msg =
      error_of([&] { restore_checkpoint(*b.trainer, load_checkpoint_file(path), path); });
  EXPECT_EQ(msg.find("[checkpoint] " + path +
                     ": field 'rng' of the 'mantissa.trainer' metadata does not match its "
                     "checksum (crc32 "),
            0u)
      << msg;
  EXPECT_NE(msg.find("the file is damaged (an exact resume would continue from other state than "
                     "the run saved); use an earlier checkpoint"),
            std::string::npos)
      << msg;
  // Refused after everything was loaded: all of it is put back.
  EXPECT_EQ(flat_params(*b.module), before);
  EXPECT_EQ(b.trainer->global_step(), 0);
  EXPECT_EQ(default_generator().state(), state);
}

TEST(CheckpointChecksums, AFlippedBitOfAWeightIsRefusedOnResumeAndOnLoad) {
  TempDir dir;
  const std::string path = written_checkpoint(dir);
  const io::SafetensorsFile file = io::load_safetensors(path);
  // The data buffer follows the header; model.net.0.weight is its first tensor.
  ASSERT_EQ(file.tensors.front().first, "model.net.0.weight");
  io::testing::Bytes bytes = io::testing::read_bytes(path);
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  bytes[8 + header + 5] ^= 0x10;  // a mantissa bit of the second weight: finite still
  io::testing::write_bytes(path, bytes);
  const std::string expected =
      "[checkpoint] " + path + ": tensor 'model.net.0.weight' does not match its checksum (crc32 ";
  ChecksumRun b = run(0);
  const std::string resume =
      error_of([&] { restore_checkpoint(*b.trainer, load_checkpoint_file(path), path); });
  EXPECT_EQ(resume.find(expected), 0u) << resume;
  TinyModule m;
  m.configure_model();
  const std::string load = error_of([&] { load_checkpoint_weights(m, path); });
  EXPECT_EQ(load.find(expected), 0u) << load;
}

// A dtype relabelled in the header keeps the bytes but reads as other numbers: the checksum
// covers the label and the shape too.
TEST(CheckpointChecksums, ARelabelledDtypeOrShapeIsRefused) {
  const uint16_t bits[6] = {0x3f80, 0x3f81, 0x3f82, 0x3f83, 0x3f84, 0x3f85};
  Tensor w = zeros({2, 3}, kBFloat16);
  std::memcpy(w.data_ptr(), bits, sizeof bits);
  CheckpointContents clean;
  clean.tensors = {{"model.w", w}};
  clean.metadata[kChecksumsMetadataKey] = checkpoint_checksums(clean);
  EXPECT_NO_THROW(verify_checkpoint_checksums(clean, "ck"));
  Tensor as_f16 = zeros({2, 3}, kFloat16);
  std::memcpy(as_f16.data_ptr(), w.data_ptr(), w.nbytes());
  Tensor as_3x2 = zeros({3, 2}, kBFloat16);
  std::memcpy(as_3x2.data_ptr(), w.data_ptr(), w.nbytes());
  for (const Tensor& relabelled : {as_f16, as_3x2}) {
    CheckpointContents damaged = clean;
    damaged.tensors = {{"model.w", relabelled}};
    const std::string msg = error_of([&] { verify_checkpoint_checksums(damaged, "ck"); });
    EXPECT_EQ(msg.find("[checkpoint] ck: tensor 'model.w' does not match its checksum"), 0u) << msg;
  }
}

// A checkpoint written before mantissa stored checksums resumes as before, with a warning.
TEST(CheckpointChecksums, AFileWithoutChecksumsResumesWithAWarning) {
  TempDir dir;
  ChecksumRun a = run(2);
  const std::string path = dir.file("old.safetensors");
  const CheckpointContents c = collect_checkpoint(*a.trainer);
  io::save_safetensors(path, c.tensors, c.metadata);  // no checksums, as older writers
  forget_warnings_said_once();
  const WarningRecorder warnings;
  ChecksumRun b = run(0);
  restore_checkpoint(*b.trainer, load_checkpoint_file(path), path);
  EXPECT_EQ(flat_params(*b.module), flat_params(*a.module));
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_EQ(warnings.messages()[0],
            "checkpoint " + path +
                " holds no checksums ('mantissa.checksums'; written before mantissa stored "
                "them): damage to its run state or tensors cannot be detected; it loads as "
                "before");
}

}  // namespace
}  // namespace mantissa::train
