// safetensors: every kind of corrupt file gives a mantissa::Error naming the file and the
// field, and a failing save never damages the file already on disk.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>

#include "io/safetensors_fixtures.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::io {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::TempDir;
using namespace io::testing;  // NOLINT

// Writes `bytes` to a file and expects loading it, and reading its header alone, to fail with
// every piece in the message (the file name is always required).
void expect_load_error(const TempDir& dir, const Bytes& bytes,
                       std::initializer_list<std::string> pieces) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  expect_error([&] { load_safetensors(path); }, {path});
  expect_error([&] { load_safetensors(path); }, pieces);
  expect_error([&] { read_safetensors_header(path); }, {path});
  expect_error([&] { read_safetensors_header(path); }, pieces);
}

const std::string kOne = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const Bytes kEight(8, 0);

TEST(SafetensorsErrors, MissingFile) {
  TempDir dir;
  expect_error([&] { load_safetensors(dir.file("nope.safetensors")); },
               {"load_safetensors", "cannot open", "nope.safetensors"});
  expect_error([&] { load_safetensors(dir.str()); }, {"is a directory"});
}

// A FIFO blocked the open until a writer came (forever); a device is no file either.
TEST(SafetensorsErrors, FifoOrDeviceIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { load_safetensors(fifo); }, {fifo, "is not a regular file"});
  expect_error([&] { read_safetensors_header(fifo); }, {fifo, "is not a regular file"});
  if (std::filesystem::exists("/dev/zero"))
    expect_error([] { load_safetensors("/dev/zero"); }, {"'/dev/zero' is not a regular file"});
}

TEST(SafetensorsErrors, ShorterThanLengthField) {
  TempDir dir;
  expect_load_error(dir, {1, 2, 3}, {"3 bytes", "shorter than the 8-byte header length"});
  expect_load_error(dir, {}, {"0 bytes"});
}

TEST(SafetensorsErrors, HeaderLengthBeyondFileOrAbsurd) {
  TempDir dir;
  Bytes b = file_bytes(kOne, kEight);
  b.resize(8 + 20);  // truncated inside the header
  expect_load_error(dir, b, {"header length", "runs past the end"});
  expect_load_error(dir, le64(uint64_t{1} << 40), {"header length 1099511627776 is absurd"});
  expect_load_error(dir, le64(~uint64_t{0}), {"is absurd"});
}

TEST(SafetensorsErrors, InvalidJsonAndNonObject) {
  TempDir dir;
  expect_load_error(dir, file_bytes(R"({"w": {"dtype": )", {}), {"not valid JSON"});
  expect_load_error(dir, file_bytes("[1, 2]", {}), {"must be a JSON object", "array"});
}

// The format pads the header with spaces. NUL padding passed: the JSON parser takes a NUL as
// the end of its input, so anything after one went unread. Spaces (and JSON whitespace) still
// pass.
TEST(SafetensorsErrors, HeaderPaddedWithNulBytesIsRefusedNamingTheOffset) {
  TempDir dir;
  const std::string nul_padded = kOne + std::string(7, '\0');  // kOne is 54 bytes: NUL at 54
  expect_load_error(dir, file_bytes(nul_padded, kEight),
                    {"header byte 54 (file offset 62) is a NUL byte", "padded with spaces",
                     "the file is damaged"});
  // Text hidden after a NUL: never parsed, so a duplicate key there went unseen.
  expect_load_error(dir, file_bytes(kOne + std::string(1, '\0') + R"(,"w":{})", kEight),
                    {"header byte 54 (file offset 62) is a NUL byte"});
  const std::string path = dir.file("spaces.safetensors");
  write_bytes(path, file_bytes(kOne + std::string(7, ' '), kEight));
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.numel(), 2);
  write_bytes(path, file_bytes(kOne + " \n\t\r ", kEight));
  EXPECT_EQ(read_safetensors_header(path).tensors.at(0).name, "w");
}

TEST(SafetensorsErrors, BadFields) {
  TempDir dir;
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", kEight),
                    {"tensor 'w'", "field 'dtype'", "unknown dtype 'C64'"});
  expect_load_error(dir, file_bytes(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", kEight),
                    {"tensor 'w'", "'dtype'"});
  expect_load_error(
      dir, file_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kEight),
      {"tensor 'w'", "'shape'", "non-negative"});
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", kEight),
                    {"tensor 'w'", "'data_offsets'"});
  expect_load_error(dir, file_bytes(R"({"w":[1,2]})", kEight),
                    {"tensor 'w'", "expected an object"});
  // Empty (a zero dim) but with strides past int64, whichever order the dims come in.
  for (const std::string shape : {"[0,4611686018427387904,4611686018427387904,8]",
                                  "[4611686018427387904,4611686018427387904,0]"}) {
    expect_load_error(
        dir,
        file_bytes(R"({"z":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,0]}})", {}),
        {"tensor 'z'", "is too large (its strides overflow int64)"});
  }
}

TEST(SafetensorsErrors, ShapeInconsistentWithOffsets) {
  TempDir dir;
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kEight),
                    {"tensor 'w'", "shape [3] of F32 needs 12 bytes", "span 8"});
  // A shape whose element count overflows must not wrap around to a small number.
  expect_load_error(
      dir,
      file_bytes(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,1],"data_offsets":[0,8]}})",
                 kEight),
      {"tensor 'w'", "needs more bytes"});
}

TEST(SafetensorsErrors, OffsetsOutOfRangeOverlappingOrNotCovering) {
  TempDir dir;
  expect_load_error(
      dir, file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", kEight),
      {"tensor 'w'", "out of range", "8 bytes"});
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", kEight),
                    {"tensor 'w'", "begin after end"});
  expect_load_error(dir,
                    file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                               kEight),
                    {"overlap", "'a'", "'b'"});
  expect_load_error(dir,
                    file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", kEight),
                    {"do not cover the buffer", "[0, 4)"});
  expect_load_error(dir, file_bytes(kOne, Bytes(12, 0)),
                    {"do not cover the buffer", "12 bytes", "end at 8"});
}

// Not only tensor names: any object of the header that repeats a key is refused naming it
// (nlohmann::json kept the last value in silence, so a tensor's second "dtype", or a second
// metadata entry, won without a word).
TEST(SafetensorsErrors, ARepeatedKeyInAnyObjectOfTheHeaderIsDamage) {
  TempDir dir;
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"F16","dtype":"F32","shape":[2],)"
                               R"("data_offsets":[0,8]}})",
                               kEight),
                    {"key 'dtype' appears twice in the object at 'w'", "the file is damaged"});
  expect_load_error(
      dir,
      file_bytes(R"({"__metadata__":{"a":"1","b":"2","a":"3"},)"
                 R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 kEight),
      {"header: key 'a' appears twice in the object at '__metadata__'", "the file is damaged"});
  // The same key in different objects, and in an array's objects, is fine.
  const std::string path = dir.file("ok.safetensors");
  write_bytes(path, file_bytes(R"({"__metadata__":{"w":"x"},"w":{"dtype":"F32","shape":[2],)"
                               R"("data_offsets":[0,8]}})",
                               kEight));
  EXPECT_EQ(read_safetensors_header(path).metadata.at("w"), "x");
  EXPECT_EQ(parse_json_refusing_duplicate_keys(R"([{"a":1},{"a":2}])", "t", "x").size(), 2u);
  expect_error([] { parse_json_refusing_duplicate_keys(R"({"a":[{"b":1,"b":2}]})", "t", "x"); },
               {"[t] x: key 'b' appears twice in the object at 'a.[]'"});
  expect_error([] { parse_json_refusing_duplicate_keys(R"({"a":1,"a":1})", "t", "x"); },
               {"key 'a' appears twice in the top level"});
}

TEST(SafetensorsErrors, DuplicateNamesAndBadMetadata) {
  TempDir dir;
  expect_load_error(dir,
                    file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                               kEight),
                    {"duplicate tensor name 'w'"});
  expect_load_error(dir,
                    file_bytes(R"({"__metadata__":{"epoch":3},)"
                               R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                               kEight),
                    {"'__metadata__' value of 'epoch' must be a string", "3"});
  expect_load_error(dir, file_bytes(R"({"__metadata__":[1]})", {}),
                    {"'__metadata__' must be an object"});
}

TEST(SafetensorsErrors, TruncatedDataIsNotCovered) {
  // A file cut inside the data: the last tensor now runs past the buffer.
  TempDir dir;
  const std::string good = dir.file("good.safetensors");
  save_safetensors(good, {{"a", ones({4}, kFloat32)}, {"b", ones({4}, kFloat64)}});
  Bytes b = read_bytes(good);
  b.resize(b.size() - 5);
  expect_load_error(dir, b, {"tensor 'b'", "out of range"});
}

TEST(SafetensorsErrors, SaveRejectsBadInputs) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  expect_error(
      [&] {
        save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}});
      },
      {"save_safetensors", "duplicate tensor name 'a'"});
  expect_error([&] { save_safetensors(path, {{"a", Tensor()}}); }, {"tensor 'a' is undefined"});
  expect_error([&] { save_safetensors(path, {{"__metadata__", ones({1})}}); }, {"reserved"});
  expect_error([&] { save_safetensors(dir.file("no/such/dir/x.safetensors"), {}); },
               {"cannot create temporary file"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

// The old file must survive byte for byte, and no temporary file may stay behind.
void expect_untouched(const TempDir& dir, const std::string& path, const Bytes& old) {
  EXPECT_EQ(read_bytes(path), old);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.str())) {
    ++files;
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 1);
}

TEST(SafetensorsAtomic, ValidationFailureKeepsOldFile) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"w", ones({3}, kFloat32)}});
  const Bytes old = read_bytes(path);
  EXPECT_THROW(save_safetensors(path, {{"w", zeros({3})}, {"w", zeros({3})}}), Error);
  expect_untouched(dir, path, old);
}

TEST(SafetensorsAtomic, WriteFailureMidFileKeepsOldFile) {
  // Limit the file size so the write of the tensor data fails half way (EFBIG), as a full
  // disk would; SIGXFSZ is ignored so write() returns the error instead of killing us.
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"w", ones({3}, kFloat32)}});
  const Bytes old = read_bytes(path);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    save_safetensors(path, {{"big", zeros({100000}, kFloat32)}});
  } catch (const Error& e) {
    msg = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("writing"), std::string::npos) << msg;
  expect_untouched(dir, path, old);
}

TEST(SafetensorsAtomic, RenameFailureRemovesTemporary) {
  // The target is a non-empty directory: rename fails after the data was written and synced.
  TempDir dir;
  const std::string path = dir.file("target");
  std::filesystem::create_directories(path + "/inside");
  expect_error([&] { save_safetensors(path, {{"w", ones({2})}}); }, {"renaming", "target"});
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.str())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "target");
  }
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(std::filesystem::exists(path + "/inside"));
}

// A FIFO (or a device such as /dev/null) at the path is refused: the rename replaced the node
// with a regular file (as root, `--save-weights /dev/null` replaced /dev/null for everyone).
TEST(SafetensorsAtomic, NonRegularTargetIsRefusedAndKept) {
  TempDir dir;
  const std::string path = dir.file("pipe");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_error(
      [&] {
        save_safetensors(path, {{"w", ones({2})}});
      },
      {"pipe", "is a FIFO (named pipe)", "give the path of a regular file"});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.str()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(SafetensorsAtomic, OverwriteReplacesWholeFile) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"w", zeros({1000})}});
  save_safetensors(path, {{"w", full({2}, 4.0)}}, {{"epoch", "1"}});
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.tensors.at(0).second.to_vector<double>(), (std::vector<double>{4, 4}));
  EXPECT_EQ(f.metadata.at("epoch"), "1");
}

}  // namespace
}  // namespace mantissa::io
