// safetensors writer and reader against the public format: exact bytes, bit-exact round trips
// for every dtype, 0-dim/empty/non-contiguous tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/safetensors_fixtures.h"
#include "mantissa/io/safetensors.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::io {
namespace {

using mantissa::testing::TempDir;
using namespace io::testing;  // NOLINT

Bytes tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return Bytes(p, p + c.nbytes());
}

TEST(SafetensorsFormat, ByteExactSmallFile) {
  TempDir dir;
  const std::string path = dir.file("small.safetensors");
  save_safetensors(path,
                   {{"a", tensor<float>({1.0f, -2.5f}, {2})}, {"b", scalar_tensor(-3, kInt8)}},
                   {{"fmt", "pt"}});
  // Expected bytes per the specification: header length 136 (little-endian u64), the JSON
  // header padded with 3 spaces to a multiple of 8, then 1.0f, -2.5f (LE) and the int8 -3.
  const std::string header =
      R"({"__metadata__":{"fmt":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I8","shape":[],"data_offsets":[8,9]}})"
      "   ";
  ASSERT_EQ(header.size(), 136u);
  Bytes want = {136, 0, 0, 0, 0, 0, 0, 0};
  want.insert(want.end(), header.begin(), header.end());
  for (uint8_t b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, 0xfd}) want.push_back(b);
  EXPECT_EQ(read_bytes(path), want);
  // No temporary file is left next to the result.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.str()),
                          std::filesystem::directory_iterator()),
            1);
}

// The header alone: the names, dtypes and shapes load_safetensors returns, in file order, and
// the metadata.
TEST(SafetensorsFormat, HeaderAloneDescribesWhatLoadReturns) {
  TempDir dir;
  const std::string path = dir.file("h.safetensors");
  save_safetensors(path,
                   {{"w", tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                    {"b", scalar_tensor(-3, kInt8)},
                    {"e", empty({0, 4}, kBFloat16)}},
                   {{"fmt", "pt"}, {"step", "7"}});
  const SafetensorsFile file = load_safetensors(path);
  const SafetensorsHeader header = read_safetensors_header(path);
  EXPECT_EQ(header.metadata, file.metadata);
  ASSERT_EQ(header.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(header.tensors[i].name, file.tensors[i].first);
    EXPECT_EQ(header.tensors[i].dtype, file.tensors[i].second.dtype());
    EXPECT_EQ(header.tensors[i].shape, file.tensors[i].second.shape());
  }
  EXPECT_EQ(header.tensors[0].name, "w");
  EXPECT_EQ(header.tensors[0].shape, (Shape{2, 3}));
  EXPECT_EQ(header.tensors[1].shape, Shape{});
  EXPECT_EQ(header.tensors[2].dtype, kBFloat16);
}

TEST(SafetensorsFormat, DTypeNames) {
  EXPECT_EQ(safetensors_dtype_name(kBFloat16), "BF16");
  EXPECT_EQ(safetensors_dtype_name(kFloat8_e4m3fn), "F8_E4M3");
  EXPECT_EQ(safetensors_dtype_name(kBool), "BOOL");
  EXPECT_EQ(dtype_from_safetensors("F8_E5M2"), kFloat8_e5m2);
  EXPECT_EQ(dtype_from_safetensors("U8"), kUInt8);
  mantissa::testing::expect_error([] { dtype_from_safetensors("C64"); },
                                  {"unknown dtype 'C64'", "BF16"});
}

// Raw bit patterns per dtype, chosen to include NaN payloads, -0, subnormals and infinities.
Tensor raw(DType dtype, const Bytes& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size() / dtype.itemsize());
  return from_buffer(bytes.data(), dtype, {n});
}

TEST(SafetensorsFormat, RoundTripEveryDTypeBitExact) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  NamedTensors in = {
      // f64: qNaN with payload 0x1234, -0, smallest subnormal, -inf
      {"f64", raw(kFloat64, {0x34, 0x12, 0, 0, 0, 0, 0xf8, 0x7f, 0, 0, 0, 0, 0, 0, 0,    0x80,
                             1,    0,    0, 0, 0, 0, 0,    0,    0, 0, 0, 0, 0, 0, 0xf0, 0xff})},
      // f32: NaN with payload 1 (signalling), -0, subnormal 0x00000001, +inf
      {"f32", raw(kFloat32, {1, 0, 0x80, 0x7f, 0, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0x80, 0x7f})},
      // f16: NaN 0x7e01, -0 0x8000, subnormal 0x0001, -inf 0xfc00
      {"f16", raw(kFloat16, {0x01, 0x7e, 0x00, 0x80, 0x01, 0x00, 0x00, 0xfc})},
      // bf16: NaN 0xffc1, -0, subnormal 0x0001, largest finite 0x7f7f
      {"bf16", raw(kBFloat16, {0xc1, 0xff, 0x00, 0x80, 0x01, 0x00, 0x7f, 0x7f})},
      // e4m3fn: NaN 0x7f, -0 0x80, subnormal 0x01, max 0x7e
      {"e4m3", raw(kFloat8_e4m3fn, {0x7f, 0x80, 0x01, 0x7e})},
      // e5m2: NaN 0x7d, -0, subnormal, -inf 0xfc
      {"e5m2", raw(kFloat8_e5m2, {0x7d, 0x80, 0x01, 0xfc})},
      {"i64", tensor<int64_t>({INT64_MIN, -1, 0, INT64_MAX}, {2, 2})},
      {"i32", tensor<int32_t>({INT32_MIN, -7, 123456789}, {3, 1})},
      {"i8", tensor<int8_t>({-128, 0, 127}, {3})},
      {"u8", tensor<uint8_t>({0, 1, 255}, {1, 3})},
      {"bool", raw(kBool, {1, 0, 0, 1})},
  };
  save_safetensors(path, in, {{"note", "every dtype"}, {"empty", ""}});
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(f.tensors[i].first, in[i].first);  // file order = save order
    EXPECT_EQ(f.tensors[i].second.dtype(), in[i].second.dtype());
    EXPECT_EQ(f.tensors[i].second.shape(), in[i].second.shape());
    EXPECT_EQ(tensor_bytes(f.tensors[i].second), tensor_bytes(in[i].second));
  }
  EXPECT_EQ(f.metadata,
            (std::map<std::string, std::string>{{"note", "every dtype"}, {"empty", ""}}));
}

TEST(SafetensorsFormat, ZeroDimEmptyAndNonContiguous) {
  TempDir dir;
  const std::string path = dir.file("shapes.safetensors");
  const Tensor base = tensor_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, kFloat32);
  const Tensor tr = base.t();  // [4, 3], non-contiguous
  ASSERT_FALSE(tr.is_contiguous());
  const Tensor strided = base.slice(1, 0, 4, 2);  // [3, 2] every other column
  save_safetensors(path, {{"scalar", scalar_tensor(-0.5, kFloat64)},
                          {"empty", empty({0, 5}, kBFloat16)},
                          {"transposed", tr},
                          {"strided", strided},
                          {"empty_last", empty({2, 0}, kInt32)}});
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.tensors[0].first, "scalar");
  EXPECT_EQ(f.tensors[0].second.dim(), 0);
  EXPECT_EQ(f.tensors[0].second.item(), -0.5);
  EXPECT_EQ(f.tensors[1].second.shape(), (Shape{0, 5}));
  EXPECT_EQ(f.tensors[1].second.dtype(), kBFloat16);
  EXPECT_EQ(f.tensors[2].first, "transposed");
  EXPECT_EQ(f.tensors[2].second.shape(), (Shape{4, 3}));
  EXPECT_EQ(f.tensors[2].second.to_vector<double>(),
            (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(f.tensors[3].second.to_vector<double>(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(f.tensors[4].second.shape(), (Shape{2, 0}));
  // The whole file: 4 + 0 + 48 + 24 + 0 data bytes after the header.
  const Bytes bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8 + 48 + 24);
}

TEST(SafetensorsFormat, NonContiguousKeepsBitPatterns) {
  // Signalling NaNs (fp16 0x7c01, f32 0x7f800001) in a transposed view: saved bit for bit.
  TempDir dir;
  const std::string path = dir.file("nan.safetensors");
  const Tensor h =
      raw(kFloat16, {0x01, 0x7c, 0x00, 0x80, 0x01, 0x00, 0x00, 0x3c, 0x01, 0xfc, 0x00, 0x00})
          .view({2, 3})
          .t();
  const Tensor f = raw(kFloat32, {1, 0, 0x80, 0x7f, 0, 0, 0, 0x80}).view({2, 1}).t();
  ASSERT_FALSE(h.is_contiguous());
  save_safetensors(path, {{"h", h}, {"f", f}});
  const SafetensorsFile file = load_safetensors(path);
  // Row-major order of the transpose: elements 0, 3, 1, 4, 2, 5 of the original.
  EXPECT_EQ(tensor_bytes(file.tensors[0].second),
            (Bytes{0x01, 0x7c, 0x00, 0x3c, 0x00, 0x80, 0x01, 0xfc, 0x01, 0x00, 0x00, 0x00}));
  EXPECT_EQ(file.tensors[0].second.shape(), (Shape{3, 2}));
  EXPECT_EQ(tensor_bytes(file.tensors[1].second), (Bytes{1, 0, 0x80, 0x7f, 0, 0, 0, 0x80}));
}

TEST(SafetensorsFormat, ReadsFilesWithUnsortedHeaderAndNoPadding) {
  // Another writer may list tensors in any order and skip padding; data order decides.
  TempDir dir;
  const std::string path = dir.file("other.safetensors");
  const std::string header =
      R"({"z":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
      R"("a":{"dtype":"F16","shape":[1],"data_offsets":[2,4]},"__metadata__":{"k":"v"}})";
  write_bytes(path, file_bytes(header, {7, 9, 0x00, 0x3c}));
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "z");
  EXPECT_EQ(f.tensors[0].second.to_vector<double>(), (std::vector<double>{7, 9}));
  EXPECT_EQ(f.tensors[1].first, "a");
  EXPECT_EQ(f.tensors[1].second.item(), 1.0);  // 0x3c00 = 1.0 in fp16
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(SafetensorsFormat, NamesAndMetadataAreJsonEscaped) {
  TempDir dir;
  const std::string path = dir.file("esc.safetensors");
  save_safetensors(path, {{"layer.\"0\"\\w\n", tensor<float>({3.0f}, {1})}},
                   {{"json", R"({"epoch": 2})"}});
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.tensors[0].first, "layer.\"0\"\\w\n");
  EXPECT_EQ(f.metadata.at("json"), R"({"epoch": 2})");
}

}  // namespace
}  // namespace mantissa::io
