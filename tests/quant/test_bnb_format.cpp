// bitsandbytes' serialized 4-bit layout: files written by bitsandbytes load here, and the files
// we write for the same weights are byte-identical to theirs.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "mantissa/formats/format_table.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/nn/linear.h"
#include "mantissa/quant/bnb_format.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/quantize.h"
#include "quant/quant_fixtures.h"

namespace mantissa::quant {
namespace {

using namespace testing;

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The fp32 Linear(80, 48) whose weights the fixture script regenerates with hash_floats.
std::shared_ptr<nn::Linear> hash_linear() {
  auto lin = std::make_shared<nn::Linear>(80, 48, true, kFloat32);
  auto w = hash_floats(48 * 80, 11), b = hash_floats(48, 12);
  for (float& v : w) v -= 1.0f;
  for (float& v : b) v -= 1.0f;
  lin->weight.detach().copy_(tensor(w, {48, 80}));
  lin->bias.detach().copy_(tensor(b));
  return lin;
}

io::NamedTensors prefixed(const nn::StateDict& sd, const std::string& prefix) {
  io::NamedTensors out;
  for (const auto& [k, t] : sd) out.emplace_back(prefix + k, t);
  return out;
}

nn::StateDict stripped(const io::SafetensorsFile& f, const std::string& prefix) {
  nn::StateDict sd;
  for (const auto& [k, t] : f.tensors) sd.insert(k.substr(prefix.size()), t);
  return sd;
}

struct LayerCase {
  FormatId format;
  bool dq;
  const char* file;
};

class BnbLinear4bitFile : public ::testing::TestWithParam<LayerCase> {
 protected:
  Linear4bitOptions options() const { return {GetParam().format, GetParam().dq, kFloat32, 64}; }
};

TEST_P(BnbLinear4bitFile, WritesTheSameBytesAsBitsandbytes) {
  auto q = Linear4bit::from_linear(*hash_linear(), options());
  io::NamedTensors tensors = prefixed(q->state_dict(), "fc.");
  io::sort_like_python_safetensors(tensors);
  const std::string path = ::testing::TempDir() + "/bnb_" + GetParam().file;
  io::save_safetensors(path, tensors);
  const auto ours = file_bytes(path), theirs = file_bytes(fixture_path(GetParam().file));
  EXPECT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(ours == theirs) << "file differs from bitsandbytes' " << GetParam().file;
  std::remove(path.c_str());
}

TEST_P(BnbLinear4bitFile, LoadsBitsandbytesFileBitExactly) {
  const auto file = io::load_safetensors(fixture_path(GetParam().file));
  // A layer with other (random) weights takes the file's state.
  Linear4bit layer(80, 48, true, options());
  layer.load_state_dict(stripped(file, "fc."));
  auto ref = Linear4bit::from_linear(*hash_linear(), options());
  EXPECT_EQ(bits_of(layer.dequantized_weight()), bits_of(ref->dequantized_weight()));
  EXPECT_EQ(bits_of(layer.bias), bits_of(ref->bias));
  // The same tensors come back out under the same keys.
  const nn::StateDict sd = stripped(file, "fc.");
  EXPECT_EQ(layer.state_dict().keys().size(), sd.size());
  for (const auto& [k, t] : layer.state_dict()) {
    const Tensor& want = sd.at(k);
    EXPECT_EQ(t.shape(), want.shape()) << k;
    EXPECT_EQ(t.dtype(), want.dtype()) << k;
    EXPECT_EQ(0, std::memcmp(t.contiguous().data_ptr(), want.contiguous().data_ptr(), t.nbytes()))
        << k;
  }
  // Forward against bitsandbytes' fp32 output (a different GEMM: close, not bit-equal).
  const auto fw = load_fixture(
      std::string(GetParam().file)
          .replace(std::string(GetParam().file).find(".safetensors"), 12, "_forward.safetensors"));
  const auto y = layer.forward(fw.at("x")).to_vector<float>();
  const auto want = fw.at("y").to_vector<float>();
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5f) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BnbLinear4bitFile,
    ::testing::Values(LayerCase{FormatId::kNf4, false, "linear4bit_nf4.safetensors"},
                      LayerCase{FormatId::kNf4, true, "linear4bit_nf4_dq.safetensors"},
                      LayerCase{FormatId::kFp4, true, "linear4bit_fp4_dq.safetensors"}),
    [](const auto& info) {
      return std::string(formats::format_name(info.param.format)) + (info.param.dq ? "_dq" : "");
    });

TEST(BnbFormat, PythonFloatRepr) {
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(2.0), "2.0");
  EXPECT_EQ(python_float_repr(-3.0), "-3.0");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float_repr(static_cast<double>(2.6267786026000977f)), "2.6267786026000977");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
}

TEST(BnbFormat, QuantStateJsonAsPythonWritesIt) {
  QuantizedTensor q = quantize_4bit(ones({4, 64}), {FormatId::kNf4, 64, true});
  q.nested.offset = 0.5f;
  EXPECT_EQ(quant_state_json(q),
            R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [4, 64], )"
            R"("nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.5})");
}

TEST(BnbFormat, CorruptQuantStateIsAClearError) {
  const auto file = io::load_safetensors(fixture_path("linear4bit_nf4_dq.safetensors"));
  const nn::StateDict good = stripped(file, "fc.");
  auto with_json = [&](const std::string& js) {
    nn::StateDict sd;
    for (const auto& [k, t] : good)
      sd.insert(k, k == "weight.quant_state.bitsandbytes__nf4"
                       ? from_buffer(js.data(), kUInt8, {static_cast<int64_t>(js.size())})
                       : t);
    return sd;
  };
  Linear4bit layer(80, 48, true, {FormatId::kNf4, true, kFloat32, 64});
  auto expect_error = [&](const nn::StateDict& sd, const std::string& needle) {
    try {
      layer.load_state_dict(sd);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(with_json("{not json"), "not valid JSON");
  expect_error(with_json(R"({"quant_type": "nf4", "blocksize": 64})"), "lacks a field");
  expect_error(with_json(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", )"
                         R"("shape": [40, 80], "nested_blocksize": 256, "nested_dtype": )"
                         R"("float32", "nested_offset": 0.1})"),
               "bytes but shape");
  expect_error(with_json(R"({"quant_type": "nf4", "blocksize": 48, "dtype": "float32", )"
                         R"("shape": [48, 80], "nested_blocksize": 256, "nested_dtype": )"
                         R"("float32", "nested_offset": 0.1})"),
               "blocksize 48");
  nn::StateDict bad_map;
  for (const auto& [k, t] : good)
    bad_map.insert(k, k == "weight.quant_map" ? t.clone().fill_(0.5) : t);
  expect_error(bad_map, "quant_map");
  // An fp4 file does not load into an nf4 layer.
  const auto fp4 = io::load_safetensors(fixture_path("linear4bit_fp4_dq.safetensors"));
  EXPECT_THROW(layer.load_state_dict(stripped(fp4, "fc.")), Error);
}

}  // namespace
}  // namespace mantissa::quant
