// safetensors files built to attack the reader rather than merely corrupt: a header nested
// 100,000 levels deep (a stack overflow when anything walks it recursively), a header length
// past the limit, and names carrying terminal escape sequences. Each must give a short,
// printable mantissa::Error, never a crash.
#include <gtest/gtest.h>

#include <string>

#include "io/safetensors_fixtures.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::io {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::TempDir;
using namespace io::testing;  // NOLINT

const Bytes kEight(8, 0);

std::string load_error(const TempDir& dir, const Bytes& bytes) {
  const std::string path = dir.file("hostile.safetensors");
  write_bytes(path, bytes);
  return error_of([&] { load_safetensors(path); });
}

bool has_control_bytes(const std::string& s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

TEST(JsonNesting, CountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0u);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{"})"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a\"[[[":"\\"})"), 1u);  // escaped quote, escaped backslash
  EXPECT_EQ(json_nesting_depth(std::string(1000, '['), 10), 11u);  // stops early
}

TEST(SafetensorsUntrusted, DeeplyNestedHeaderIsRefusedBeforeParsing) {
  TempDir dir;
  const std::string deep = R"({"w":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::string msg = load_error(dir, file_bytes(deep, {}));
  EXPECT_NE(msg.find("hostile.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than 64 levels deep"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 400u) << "the header must not be dumped into the message";
  // The same depth inside metadata, and unbalanced brackets, are refused just as early.
  const std::string in_metadata = R"({"__metadata__":{"k":)" + std::string(100000, '{') + "}}";
  EXPECT_NE(load_error(dir, file_bytes(in_metadata, {})).find("levels deep"), std::string::npos);
  // A depth of 64 is allowed (the error is then about the tensor entry, not the depth).
  const std::string ok_depth = R"({"w":)" + std::string(63, '[') + std::string(63, ']') + "}";
  const std::string shallow = load_error(dir, file_bytes(ok_depth, {}));
  EXPECT_EQ(shallow.find("levels deep"), std::string::npos) << shallow;
  EXPECT_NE(shallow.find("expected an object"), std::string::npos) << shallow;
  EXPECT_LT(shallow.size(), 400u) << shallow;
}

TEST(SafetensorsUntrusted, BracketsInsideStringsDoNotCount) {
  TempDir dir;
  const std::string header = R"({"__metadata__":{"note":")" + std::string(1000, '[') +
                             R"("},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string path = dir.file("ok.safetensors");
  write_bytes(path, file_bytes(header, kEight));
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("note"), std::string(1000, '['));
}

TEST(SafetensorsUntrusted, HeaderLongerThanTheLimitIsRefusedUnread) {
  TempDir dir;
  // Only the length field and a few bytes: the limit is checked before anything is allocated.
  Bytes b = le64(kSafetensorsMaxHeaderBytes + 1);
  b.resize(64, ' ');
  const std::string msg = load_error(dir, b);
  EXPECT_NE(msg.find("header length 100000001 is absurd (limit 100000000 bytes)"),
            std::string::npos)
      << msg;
}

TEST(SafetensorsUntrusted, EscapeSequencesInNamesAreEscaped) {
  TempDir dir;
  // JSON's \u001b is the ESC byte once parsed: the tensor name is "ESC[31mw".
  const std::string msg = load_error(
      dir,
      file_bytes(R"({"\u001b[31mw":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", kEight));
  EXPECT_FALSE(has_control_bytes(msg)) << msg;
  EXPECT_NE(msg.find(R"(tensor '\x1b[31mw')"), std::string::npos) << msg;

  const std::string dtype = load_error(
      dir, file_bytes(R"({"w":{"dtype":"\u001b]0;owned\u0007","shape":[1],"data_offsets":[0,8]}})",
                      kEight));
  EXPECT_FALSE(has_control_bytes(dtype)) << dtype;
  EXPECT_NE(dtype.find(R"(unknown dtype '\x1b]0;owned\x07')"), std::string::npos) << dtype;

  const std::string meta = load_error(dir, file_bytes(R"({"__metadata__":{"\u001b[2J":1}})", {}));
  EXPECT_FALSE(has_control_bytes(meta)) << meta;
  EXPECT_NE(meta.find(R"(value of '\x1b[2J' must be a string)"), std::string::npos) << meta;

  const std::string dup =
      load_error(dir, file_bytes(R"({"\u001bx":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("\u001bx":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 kEight));
  EXPECT_FALSE(has_control_bytes(dup)) << dup;
  EXPECT_NE(dup.find(R"(duplicate tensor name '\x1bx')"), std::string::npos) << dup;
}

TEST(SafetensorsUntrusted, QuotedValuesAreCut) {
  TempDir dir;
  const std::string big(100000, 'z');
  const std::string name = load_error(
      dir,
      file_bytes(R"({")" + big + R"(":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", kEight));
  EXPECT_NE(name.find("... (100000 bytes)"), std::string::npos) << name.substr(0, 500);
  EXPECT_LT(name.size(), 600u);
  const std::string value = load_error(dir, file_bytes(R"({"w":[")" + big + R"("]})", kEight));
  EXPECT_NE(value.find("expected an object"), std::string::npos) << value.substr(0, 500);
  EXPECT_LT(value.size(), 600u);
}

// A one-element tensor with 100,000 dimensions costs nothing to load but crashed whatever
// walked its dimensions (printing recursed once per dimension and overflowed the stack). The
// cap is checked before the dimensions are read, for load and for read_safetensors_header.
std::string shape_of_ones(size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) s += i == 0 ? "1" : ",1";
  return s + "]";
}

TEST(SafetensorsUntrusted, RankAboveTheCapIsRefusedNamingTensorRankAndCap) {
  static_assert(kSafetensorsMaxRank == 64);
  TempDir dir;
  const Bytes four(4, 0);
  const auto header = [](size_t rank) {
    return R"({"huge":{"dtype":"F32","shape":)" + shape_of_ones(rank) +
           R"(,"data_offsets":[0,4]}})";
  };
  const std::string msg = load_error(dir, file_bytes(header(100000), four));
  EXPECT_NE(msg.find("hostile.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'huge': rank 100000 is above the limit of 64 dimensions"),
            std::string::npos)
      << msg;
  EXPECT_LT(msg.size(), 400u) << "the shape must not be dumped into the message";
  EXPECT_NE(load_error(dir, file_bytes(header(65), four)).find("rank 65 is above the limit"),
            std::string::npos);
  const std::string path = dir.file("hostile.safetensors");
  EXPECT_NE(error_of([&] { read_safetensors_header(path); }).find("rank 65 is above the limit"),
            std::string::npos);

  // Rank 64 is allowed, and the tensor loads with every dimension.
  write_bytes(path, file_bytes(header(64), four));
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].second.dim(), 64);
  EXPECT_EQ(f.tensors[0].second.numel(), 1);
}

TEST(SafetensorsUntrusted, WriterRefusesARankTheReaderWouldRefuse) {
  TempDir dir;
  const std::string path = dir.file("deep.safetensors");
  const std::string msg = error_of([&] {
    save_safetensors(path, {{"deep", zeros(Shape(65, 1), kFloat32)}});
  });
  EXPECT_NE(msg.find("tensor 'deep' has rank 65, above the limit of 64 dimensions"),
            std::string::npos)
      << msg;
  save_safetensors(path, {{"deep", zeros(Shape(64, 1), kFloat32)}});
  EXPECT_EQ(load_safetensors(path).tensors[0].second.dim(), 64);
}

TEST(SafetensorsUntrusted, NamesWithEscapesStillLoadIntact) {
  // Escaping is for messages only: the data keeps the exact name.
  TempDir dir;
  const std::string path = dir.file("named.safetensors");
  save_safetensors(path, {{"\x1b[31mw", zeros({2}, kFloat32)}}, {{"\x1b", "\x07"}});
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].first, "\x1b[31mw");
  EXPECT_EQ(f.metadata.at("\x1b"), "\x07");
}

}  // namespace
}  // namespace mantissa::io
