// Full-precision (pretrained) weights loaded into layers that are already quantized: the
// usual cause is a TrainModule that loads them in configure_model, after
// BitsandbytesPrecision's init scope quantized the layers as they were built. Every quantized
// layer says so, names its mode as --precision does, and says where to load them instead.
#include <gtest/gtest.h>

#include <cstring>

#include "mantissa/core/generator.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "support/test_util.h"

namespace mantissa::quant {
namespace {

using mantissa::testing::error_of;

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void expect_pieces(const std::string& what, const std::vector<std::string>& pieces) {
  for (const std::string& part : pieces)
    EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
}

// The trial's model (b7): a body of two Linear layers and a head, so the init scope quantizes
// the body when the head is registered and leaves the head to convert_module.
struct Net : nn::Module {
  Net() : Module("Net") {
    register_module(
        "body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                    std::make_shared<nn::Linear>(16, 8), std::make_shared<nn::ReLU>(),
                    std::make_shared<nn::Linear>(8, 4)}));
    register_module("head", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override {
    return child("head")->forward(child("body")->forward(x));
  }
};

// Net built under the plugin's init scope, as the Trainer builds it in configure_model.
std::unique_ptr<Net> build_under(train::BitsandbytesPrecision& plugin) {
  train::ScopePtr scope = plugin.module_init_context();
  EXPECT_NE(scope, nullptr);
  manual_seed(7);
  return std::make_unique<Net>();
}

// The 4-bit layers name their format with its double quantization: an nf4-dq layer said
// "(nf4)".
TEST(LoadIntoQuantized, FourBitLayerNamesItsModeWithDoubleQuantization) {
  manual_seed(3);
  nn::Linear lin(8, 4);
  const nn::StateDict full = lin.state_dict();
  for (const auto& [format, dq, mode] :
       std::vector<std::tuple<FormatId, bool, std::string>>{{FormatId::kNf4, false, "(nf4)"},
                                                            {FormatId::kNf4, true, "(nf4-dq)"},
                                                            {FormatId::kFp4, false, "(fp4)"},
                                                            {FormatId::kFp4, true, "(fp4-dq)"}}) {
    Linear4bitOptions o;
    o.format = format;
    o.double_quant = dq;
    auto q = Linear4bit::from_linear(lin, o);
    const std::string what = error_of([&] { q->load_state_dict(full); });
    expect_pieces(what, {"[Linear4bit] \"weight\" is a full-precision weight of shape [4, 8], "
                         "but this layer is already 4-bit " +
                         mode + ": load full-precision weights before"});
  }
}

// An int8 layer given a full-precision weight says what the 4-bit layers say (not "dtype
// mismatch ... checkpoint has float32, the module has int8" and "missing keys: SCB,
// weight_format", without a word about quantization), and changes nothing.
TEST(LoadIntoQuantized, Int8LayerSaysItIsAlreadyQuantized) {
  manual_seed(4);
  nn::Sequential net;
  net.push_back(std::make_shared<nn::Linear>(8, 4));
  const nn::StateDict full = net.state_dict();
  nn::Sequential quantized;
  quantized.push_back(
      Linear8bitLt::from_linear(dynamic_cast<const nn::Linear&>(*net.children()[0]), {}));
  const Tensor codes = quantized.state_dict().at("0.weight").clone();
  const Tensor bias = quantized.state_dict().at("0.bias").clone();
  const std::string what = error_of([&] { quantized.load_state_dict(full); });
  expect_pieces(
      what,
      {"[Linear8bitLt] \"0.weight\" is a full-precision weight of shape [4, 8], but "
       "this layer is already int8-quantized (mode int8: int8 rows and fp32 row scales "
       "SCB): load full-precision weights before the layer is quantized",
       "in its constructor, not in configure_model", "Linear8bitLt::from_linear", "docs/qlora.md"});
  EXPECT_EQ(what.find("dtype mismatch"), std::string::npos) << what;
  EXPECT_TRUE(same_bytes(quantized.state_dict().at("0.weight"), codes));
  EXPECT_TRUE(same_bytes(quantized.state_dict().at("0.bias"), bias));
  // The int8 file itself still loads into an int8 layer.
  manual_seed(5);
  nn::Linear other(8, 4);
  auto b = Linear8bitLt::from_linear(other);
  const nn::StateDict int8_state =
      dynamic_cast<Linear8bitLt&>(*quantized.children()[0]).state_dict();
  b->load_state_dict(int8_state);
  EXPECT_TRUE(same_bytes(b->state_dict().at("weight"), codes));
  EXPECT_TRUE(same_bytes(b->state_dict().at("SCB"), int8_state.at("SCB")));
}

// int8-training keeps a float weight: full-precision weights load into it as into a Linear.
TEST(LoadIntoQuantized, Int8TrainingLayerLoadsFullPrecisionWeights) {
  manual_seed(6);
  nn::Linear lin(8, 4);
  Linear8bitOptions o;
  o.mode = Int8Mode::kTraining;
  manual_seed(8);
  auto q = Linear8bitLt::from_linear(nn::Linear(8, 4), o);
  q->load_state_dict(lin.state_dict());
  EXPECT_TRUE(same_bytes(q->weight, lin.weight));
  EXPECT_TRUE(same_bytes(q->bias, lin.bias));
}

// The trial's program: a model built under the plugin's init scope (configure_model), then
// given its pretrained float32 weights. Each mode's refusal names the first quantized layer,
// its mode, and where to load.
TEST(LoadIntoQuantized, PretrainedWeightsAfterTheInitScopeNameTheModeAndWhereToLoad) {
  nn::StateDict pretrained;
  {
    manual_seed(9);
    Net full;
    pretrained = full.state_dict();
  }
  for (const auto& [mode, says] : std::vector<std::pair<std::string, std::string>>{
           {"nf4",
            "[Linear4bit] \"body.0.weight\" is a full-precision weight of shape [8, 16], "
            "but this layer is already 4-bit (nf4): load full-precision weights before "
            "the layer is quantized"},
           {"nf4-dq", "but this layer is already 4-bit (nf4-dq)"},
           {"fp4-dq", "but this layer is already 4-bit (fp4-dq)"},
           {"int8",
            "[Linear8bitLt] \"body.0.weight\" is a full-precision weight of shape "
            "[8, 16], but this layer is already int8-quantized"}}) {
    train::BitsandbytesPrecision plugin(mode);
    const auto model = build_under(plugin);
    ASSERT_EQ(train::BitsandbytesPrecision::quantized_stats(*model).layers, 2) << mode;
    const std::string what = error_of([&] { model->load_state_dict(pretrained); });
    expect_pieces(what, {says, "in its constructor, not in configure_model", "docs/qlora.md"});
  }
  // int8-training keeps float weights: the same load works.
  train::BitsandbytesPrecision plugin("int8-training");
  const auto model = build_under(plugin);
  ASSERT_EQ(train::BitsandbytesPrecision::quantized_stats(*model).layers, 2);
  model->load_state_dict(pretrained);
  EXPECT_TRUE(same_bytes(model->state_dict().at("body.0.weight"), pretrained.at("body.0.weight")));
}

// What docs/trainer.md says to do instead: full-precision weights load into the model before
// it is quantized (a TrainModule's constructor, outside the init scope), and a quantized
// checkpoint loads once every layer is quantized (after convert_module: the init scope leaves
// the root's last child, the head, to it).
TEST(LoadIntoQuantized, WhereTheWeightsLoad) {
  nn::StateDict pretrained;
  {
    manual_seed(9);
    Net full;
    pretrained = full.state_dict();
  }
  for (const std::string mode : {"nf4-dq", "int8"}) {
    train::BitsandbytesPrecision plugin(mode);
    manual_seed(10);
    Net before;
    before.load_state_dict(pretrained);
    plugin.convert_module(before);
    ASSERT_EQ(train::BitsandbytesPrecision::quantized_stats(before).layers, 3) << mode;
    const nn::StateDict quantized = before.state_dict();

    const auto model = build_under(plugin);
    const std::string what = error_of([&] { model->load_state_dict(quantized); });
    expect_pieces(what, {"head.weight"});
    plugin.convert_module(*model);
    model->load_state_dict(quantized);
    for (const auto& [k, t] : quantized)
      EXPECT_TRUE(same_bytes(model->state_dict().at(k), t)) << mode << " " << k;
  }
}

}  // namespace
}  // namespace mantissa::quant
