// BitsandbytesPrecision: the weight format each precision's registry line hands it, which Linear
// layers convert_module replaces, the quantize-while-building init scope, the autocast step scope,
// and LoRA on quantized bases (QLoRA) matching LoRA on the dequantized weight.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/allocator.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"
#include "mantissa/train/model_summary.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

using namespace mantissa::testing;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(1);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(32, 8)});
}

bool is_4bit(const std::shared_ptr<nn::Module>& m) {
  return dynamic_cast<quant::Linear4bit*>(m.get()) != nullptr;
}

// The registry line of each quantizing precision names its weight format; the plugin keeps it
// and names itself by it, and a layer it makes reports the same format back.
TEST(BitsandbytesPrecision, RegistryLinesNameTheWeightFormat) {
  using quant::WeightQuantization;
  const std::vector<std::pair<std::string, WeightQuantization>> expected = {
      {"nf4", {.format = FormatId::kNf4}},
      {"nf4-dq", {.format = FormatId::kNf4, .double_quant = true}},
      {"fp4", {.format = FormatId::kFp4}},
      {"fp4-dq", {.format = FormatId::kFp4, .double_quant = true}},
      {"int8", {.format = FormatId::kInt8Rowwise}},
      {"int8-training", {.format = FormatId::kInt8Rowwise, .trainable = true}}};
  std::vector<std::string> quantizing;
  for (const PrecisionEntry& e : precision_registry())
    if (e.weights) quantizing.push_back(e.name);
  EXPECT_EQ(quantizing,
            (std::vector<std::string>{"nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "int8-training"}));
  for (const auto& [name, weights] : expected) {
    SCOPED_TRACE(name);
    EXPECT_EQ(weight_quantization_of(name), weights);
    EXPECT_EQ(precision_of(weights), name);
    BitsandbytesPrecision p(name, kFloat32);
    EXPECT_EQ(p.precision(), name);
    EXPECT_EQ(p.weights(), weights);
    const auto layer = p.quantize(nn::Linear(64, 8));
    EXPECT_EQ(quantized_layer_weights(*layer), weights);
  }
  expect_error(
      [] { weight_quantization_of("nf3"); },
      {"unknown quantization mode 'nf3'", "nf4, nf4-dq, fp4, fp4-dq, int8, int8-training"});
  expect_error([] { weight_quantization_of("bf16-mixed"); }, "unknown quantization mode");
  expect_error([] { BitsandbytesPrecision("nf4", kFloat64); }, "bfloat16, float16 or float32");
  BitsandbytesPrecision p("nf4-dq");
  EXPECT_EQ(p.precision(), "nf4-dq");
  EXPECT_EQ(p.dtype(), kBFloat16);
  EXPECT_EQ(p.param_dtype(), kFloat32);
}

TEST(BitsandbytesPrecision, ConvertReplacesEveryLinearButIgnoredOnes) {
  auto net = mlp();
  BitsandbytesPrecision("nf4").convert_module(*net);
  EXPECT_TRUE(is_4bit((*net)[0]));
  EXPECT_TRUE(is_4bit((*net)[2]));

  auto kept = mlp();
  BitsandbytesPrecision("fp4", kFloat32, {"2"}).convert_module(*kept);
  EXPECT_TRUE(is_4bit((*kept)[0]));
  EXPECT_NE(dynamic_cast<nn::Linear*>((*kept)[2].get()), nullptr);
  const QuantizedStats s = BitsandbytesPrecision::quantized_stats(*kept);
  EXPECT_EQ(s.layers, 1);
  EXPECT_EQ(s.weight_numel, 64 * 32);
  EXPECT_DOUBLE_EQ(s.bits_per_parameter(), 4.5);

  nn::Sequential no_linear;
  no_linear.push_back(std::make_shared<nn::ReLU>());
  expect_error([&] { BitsandbytesPrecision("nf4").convert_module(no_linear); }, "has none");
}

// The command line converts the bare model, then the Trainer the TrainModule around it (names
// one component longer): a layer kept by its name the first time stays kept. A prefix that
// starts no layer's name is an error with the nearest names.
TEST(BitsandbytesPrecision, IgnoredLayersStayKeptWhenConvertedAgainUnderAParent) {
  auto net = mlp();
  BitsandbytesPrecision p("nf4", kBFloat16, {"2"});
  p.convert_module(*net);
  nn::Sequential parent;
  parent.register_module("net", net);
  p.convert_module(parent);
  EXPECT_TRUE(is_4bit((*net)[0]));
  EXPECT_NE(dynamic_cast<nn::Linear*>((*net)[2].get()), nullptr) << "quantized on the 2nd pass";
  expect_error([] { BitsandbytesPrecision("nf4", kBFloat16, {"head"}).convert_module(*mlp()); },
               {"ignore_modules (--quant-ignore) names 'head', but no layer", "closest names: "});
  // The suggestions are the Linear layers (0 and 2), not the ReLU between them.
  try {
    BitsandbytesPrecision("nf4", kBFloat16, {"head"}).convert_module(*mlp());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closest names: 0, 2"), std::string::npos) << e.what();
  }
}

// The model summary shows the MLP's layers as "net.0" and "net.2" (the classifier's slot);
// --quant-ignore takes names within the model, and "net.2" said only "closest names: 2, 0".
TEST(BitsandbytesPrecision, SummaryStyleNameSaysWhichPartToDrop) {
  expect_error([] { BitsandbytesPrecision("nf4", kBFloat16, {"net.2"}).convert_module(*mlp()); },
               {"ignore_modules (--quant-ignore) names 'net.2', but no layer of the model "
                "(Sequential) starts with it (names are relative to the model, without the "
                "'net.' the summary shows before them: pass '2'); closest names: 2, 0"});
}

// --quant-ignore naming every Linear would leave a "quantized" run with nothing quantized (0 bits
// per quantized weight in its metrics): an error naming the layers and the fix.
TEST(BitsandbytesPrecision, IgnoringEveryLinearIsAnError) {
  auto net = mlp();
  expect_error(
      [&] {
        BitsandbytesPrecision("nf4", kBFloat16, {"0", "2"}).convert_module(*net);
      },
      {"ignore_modules (--quant-ignore 0,2) keeps every Linear layer of the model "
       "(Sequential: 0, 2) in full precision, so precision 'nf4' would quantize nothing; "
       "leave at least one layer out of --quant-ignore, or choose a precision that does "
       "not quantize (such as bf16-mixed)"});
  EXPECT_NE(dynamic_cast<nn::Linear*>((*net)[0].get()), nullptr);
  // One layer kept is fine, and so is converting again under a parent.
  BitsandbytesPrecision p("int8", kBFloat16, {"0"});
  p.convert_module(*net);
  nn::Sequential parent;
  parent.register_module("net", net);
  p.convert_module(parent);
  EXPECT_NE(dynamic_cast<nn::Linear*>((*net)[0].get()), nullptr);
  EXPECT_EQ(dynamic_cast<nn::Linear*>((*net)[2].get()), nullptr);
}

// A model quantized in one mode is refused by another mode's plugin: only nn::Linear layers
// are replaced, so an nf4 model converted under "int8" kept its 4-bit layers (and compute
// dtype) while the run, its checkpoints and metrics said int8. The same mode again is a no-op
// (the Trainer converts at setup what the user already converted).
TEST(BitsandbytesPrecision, AModelQuantizedInAnotherModeIsRefused) {
  auto model = mlp();
  BitsandbytesPrecision("nf4", kFloat32).convert_module(*model);
  ASSERT_TRUE(is_4bit((*model)[0]));
  EXPECT_EQ(quantized_layer_weights(*(*model)[0]),
            quant::WeightQuantization{.format = FormatId::kNf4});
  EXPECT_EQ(quantized_layer_weights(*(*model)[1]), std::nullopt);
  EXPECT_EQ(describe_quantized_layers(*model), (std::vector<std::string>{"0 (nf4)", "2 (nf4)"}));
  EXPECT_EQ(describe_quantized_layers(*model, 1),
            (std::vector<std::string>{"0 (nf4)", "... 1 more"}));
  BitsandbytesPrecision("nf4", kFloat32).convert_module(*model);  // same mode: fine
  for (const char* other : {"nf4-dq", "fp4", "int8", "int8-training"}) {
    BitsandbytesPrecision p(other);
    expect_error([&] { p.convert_module(*model); },
                 fmt::format("the model (Sequential) is already quantized in another mode: 0 "
                             "(nf4), 2 (nf4); precision '{}' would leave those layers as they "
                             "are",
                             other));
  }
  auto int8 = mlp();
  BitsandbytesPrecision("int8").convert_module(*int8);
  EXPECT_EQ(quantized_layer_weights(*(*int8)[2]),
            quant::WeightQuantization{.format = FormatId::kInt8Rowwise});
  expect_error([&] { BitsandbytesPrecision("int8-training").convert_module(*int8); },
               "0 (int8), 2 (int8)");
}

// An FP8 model (the transformer-engine precision's fp8::Linear layers) is refused too, with or
// without an excluded Linear, naming the FP8 layers (not quantizing the excluded Linear beside
// them, nor saying the model has no Linear layers at all).
TEST(BitsandbytesPrecision, AModelWithFp8LayersIsRefused) {
  auto model = mlp();
  model->replace_child("0", fp8::Linear::from_linear(*model->at<nn::Linear>(0), 16));
  expect_error([&] { BitsandbytesPrecision("nf4").convert_module(*model); },
               "the model (Sequential) holds FP8 layers, as the transformer-engine precision "
               "makes them (0); precision 'nf4' quantizes nn::Linear layers");
  EXPECT_NE(model->at<nn::Linear>(2), nullptr);  // left as it was
}

// A state dict from a converted model loaded into an unconverted one (or the reverse) says
// which step is missing. Before, the error listed size mismatches ([1024, 1] against [32, 64])
// and unexpected keys ("0.weight.absmax", ...) without saying that the file was quantized or
// held adapters, nor what to do.
TEST(BitsandbytesPrecision, LoadingAConvertedStateDictIntoAnotherModelSaysWhatToDo) {
  auto quantized = mlp();
  BitsandbytesPrecision("nf4").convert_module(*quantized);
  expect_error([&] { mlp()->load_state_dict(quantized->state_dict()); },
               {"size mismatch for \"0.weight\"",
                "hint: the state dict holds 4-bit (nf4) quantized weights "
                "(\"0.weight.quant_state.bitsandbytes__nf4\"), the module full-precision ones: "
                "quantize the module in the mode the file was saved in first"});
  auto int8 = mlp();
  BitsandbytesPrecision("int8").convert_module(*int8);
  expect_error([&] { mlp()->load_state_dict(int8->state_dict()); },
               "hint: the state dict holds LLM.int8 quantized weights (\"0.SCB\")");
  auto adapted = mlp();
  nn::apply_lora(*adapted, nn::LoraConfig{});
  expect_error([&] { mlp()->load_state_dict(adapted->state_dict()); },
               "hint: the state dict holds LoRA adapters (\"0.lora_A.weight\"), the module has "
               "none: apply nn::apply_lora");
  expect_error([&] { adapted->load_state_dict(mlp()->state_dict()); },
               "hint: the module has LoRA adapters (\"0.lora_A.weight\"), the state dict none: "
               "load the base weights before nn::apply_lora");
  // Matching models load as before, with no hint.
  auto same = mlp();
  nn::apply_lora(*same, nn::LoraConfig{});
  same->load_state_dict(adapted->state_dict());
}

// merge_and_unload refuses quantized bases, naming them, and leaves the model as it was.
TEST(BitsandbytesPrecision, MergeAndUnloadRefusesQuantizedBases) {
  auto model = mlp();
  nn::apply_lora(*model, nn::LoraConfig{});
  BitsandbytesPrecision("nf4", std::nullopt, {"2"}).convert_module(*model);
  expect_error([&] { nn::merge_and_unload(*model); },
               "only bases that keep a floating-point weight (nn::Linear, an FP8 layer) can "
               "absorb their adapters; these layers' weights are quantized: 0 (Linear4bit)");
  EXPECT_NE(model->at<nn::LoRALinear>(0), nullptr);
  EXPECT_NE(model->at<nn::LoRALinear>(2), nullptr);  // not unloaded either
  EXPECT_FALSE(model->at<nn::LoRALinear>(2)->merged());
}

// The model summary counts a quantized layer's weight as the frozen elements it stands for
// (like a LoRA run's frozen base weights), so the totals do not shrink to the biases.
TEST(BitsandbytesPrecision, SummaryCountsQuantizedWeightsAsNonTrainable) {
  auto net = mlp();
  const int64_t all = net->parameter_count();
  BitsandbytesPrecision("nf4").convert_module(*net);
  for (const auto& p : net->parameters()) Tensor(p).requires_grad_(true);
  const ModelSummaryTotals t = summarize_totals(*net);
  EXPECT_EQ(t.parameters, all);
  EXPECT_EQ(t.trainable_parameters, 32 + 8);  // the biases
}

// int8-training keeps its weights as trainable parameters: counted once (the summary added the
// quantized weight count on top, showing twice the model, half of it "non-trainable").
TEST(BitsandbytesPrecision, SummaryCountsInt8TrainingWeightsOnce) {
  auto net = mlp();
  const int64_t all = net->parameter_count();
  BitsandbytesPrecision("int8-training").convert_module(*net);
  const ModelSummaryTotals t = summarize_totals(*net);
  EXPECT_EQ(t.parameters, all);
  EXPECT_EQ(t.trainable_parameters, all);
  const QuantizedStats s = BitsandbytesPrecision::quantized_stats(*net);
  EXPECT_EQ(s.weight_numel, 64 * 32 + 32 * 8);
  EXPECT_EQ(s.buffer_weight_numel, 0);
}

// A Linear held in two slots is one layer: quantized once, both slots holding the same
// Linear4bit (not one copy of the weight per slot), listed once in the
// summary, and its bytes counted once.
TEST(BitsandbytesPrecision, ASharedLinearIsQuantizedOnceAndStaysShared) {
  manual_seed(1);
  nn::Sequential net;
  auto shared = std::make_shared<nn::Linear>(32, 32);
  net.push_back(shared);
  net.push_back(std::make_shared<nn::ReLU>());
  net.push_back(shared);
  const ModelSummaryTotals fp32 = summarize_totals(net);
  EXPECT_EQ(fp32.parameters, 32 * 32 + 32);
  EXPECT_EQ(fp32.state_bytes, (32 * 32 + 32) * 4);
  std::vector<std::string> rows;
  for (const auto& r : summarize_layers(net, 2)) rows.push_back(r.name);
  EXPECT_EQ(rows, (std::vector<std::string>{"0", "1"}));

  BitsandbytesPrecision("nf4").convert_module(net);
  EXPECT_TRUE(is_4bit(net[0]));
  EXPECT_EQ(net[0], net[2]);
  const QuantizedStats s = BitsandbytesPrecision::quantized_stats(net);
  EXPECT_EQ(s.layers, 1);
  EXPECT_EQ(s.weight_numel, 32 * 32);
  EXPECT_EQ(summarize_totals(net).parameters, 32 * 32 + 32);
}

// ignore_modules may name a shared Linear by any of its slots' names, as its state_dict keys
// do: "2" (the second slot of the Linear at "0") keeps it in full precision in both slots,
// although named_modules() lists it as "0" only.
TEST(BitsandbytesPrecision, IgnoreModulesAcceptsASharedLinearsSecondName) {
  manual_seed(1);
  nn::Sequential net;
  auto shared = std::make_shared<nn::Linear>(32, 32);
  net.push_back(shared);
  net.push_back(std::make_shared<nn::ReLU>());
  net.push_back(shared);
  net.push_back(std::make_shared<nn::Linear>(32, 8));
  BitsandbytesPrecision("nf4", std::nullopt, {"2"}).convert_module(net);
  EXPECT_EQ(net[0], shared);
  EXPECT_EQ(net[2], shared);
  EXPECT_TRUE(is_4bit(net[3]));
  EXPECT_EQ(BitsandbytesPrecision::quantized_stats(net).layers, 1);
}

// One Linear held by two children of the root and by a slot of the root itself, built in the
// init scope: each finished child is quantized on its own walk, and the Linear was quantized
// once per walk, into three unshared 4-bit layers (three copies of one weight, trained apart).
class SharedAcrossChildren : public nn::Module {
 public:
  SharedAcrossChildren() : Module("SharedAcrossChildren") {
    auto shared = std::make_shared<nn::Linear>(32, 32);
    register_module(
        "a", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                 shared, std::make_shared<nn::ReLU>()}));
    register_module("b", std::make_shared<nn::Sequential>(
                             std::initializer_list<std::shared_ptr<nn::Module>>{shared}));
    register_module("head", shared);
    register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{32}));
  }
};

TEST(BitsandbytesPrecision, InitScopeQuantizesALinearSharedBetweenChildrenOnce) {
  BitsandbytesPrecision plugin("nf4");
  std::unique_ptr<SharedAcrossChildren> model;
  {
    ScopePtr scope = plugin.module_init_context();
    manual_seed(2);
    model = std::make_unique<SharedAcrossChildren>();
  }
  const auto a = model->child_as<nn::Sequential>("a");
  const auto b = model->child_as<nn::Sequential>("b");
  EXPECT_TRUE(is_4bit((*a)[0]));
  EXPECT_EQ((*a)[0], (*b)[0]);
  EXPECT_EQ((*a)[0], model->child("head"));
  EXPECT_EQ(BitsandbytesPrecision::quantized_stats(*model).layers, 1);
  plugin.convert_module(*model);  // nothing left to do
  EXPECT_EQ((*a)[0], model->child("head"));
}

TEST(BitsandbytesPrecision, Int8ModesUseLinear8bitLt) {
  auto frozen = mlp();
  BitsandbytesPrecision int8("int8");
  EXPECT_EQ(int8.dtype(), kFloat16);  // Lightning's default for the int8 modes
  int8.convert_module(*frozen);
  auto q = std::dynamic_pointer_cast<quant::Linear8bitLt>((*frozen)[0]);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->weight.dtype(), kInt8);
  EXPECT_FALSE(q->weight.requires_grad());

  auto training = mlp();
  BitsandbytesPrecision("int8-training").convert_module(*training);
  auto t = std::dynamic_pointer_cast<quant::Linear8bitLt>((*training)[2]);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->weight.requires_grad());
  Generator g(5);
  sum(training->forward(uniform({4, 64}, -1, 1, kFloat32, &g))).backward();
  EXPECT_TRUE(t->weight.grad().defined());
}

// LoRA first, setup later: the adapters stay float, their base is quantized.
TEST(BitsandbytesPrecision, ConvertQuantizesLoraBasesNotAdapters) {
  auto net = mlp();
  nn::apply_lora(*net, {.r = 2, .alpha = 4});
  BitsandbytesPrecision("nf4-dq").convert_module(*net);
  auto lora = std::dynamic_pointer_cast<nn::LoRALinear>((*net)[0]);
  ASSERT_NE(lora, nullptr);
  EXPECT_TRUE(is_4bit(lora->base_layer()));
  EXPECT_EQ(lora->lora_A()->weight.dtype(), kFloat32);
  EXPECT_LT(BitsandbytesPrecision::quantized_stats(*net).bits_per_parameter(), 4.2);
}

// A model built like the GPT: a first child, then each block constructed, re-initialised and
// registered; forward calls whatever is in the slots.
class Stack : public nn::Module {
 public:
  Stack(int64_t blocks, int64_t width) : Module("Stack") {
    // Registering a first child before building the blocks (as the GPT registers its
    // embeddings) tells the init scope which module is the root.
    register_module("ln_in", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width}));
    for (int64_t i = 0; i < blocks; ++i) {
      auto b = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(width, 4 * width), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(4 * width, width)});
      nn::init::normal_(b->at<nn::Linear>(0)->weight, 0.0, 0.02);  // after construction
      register_module("h" + std::to_string(i), b);
    }
    register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (const auto& [name, m] : child_slots()) y = m->forward(y);
    return y;
  }
};

// Built in the init scope, block h<i> is quantized as soon as the model registers the next
// slot, so building never holds the whole float32 model.
TEST(BitsandbytesPrecision, InitScopeQuantizesWhileTheModelIsBuilt) {
  const int64_t blocks = 6, width = 64;
  reset_peak_memory_stats();
  int64_t base = memory_allocated();
  { Stack full(blocks, width); }
  const int64_t full_peak = max_memory_allocated() - base;

  BitsandbytesPrecision plugin("nf4");
  reset_peak_memory_stats();
  base = memory_allocated();
  std::unique_ptr<Stack> model;
  {
    ScopePtr scope = plugin.module_init_context();
    manual_seed(2);
    model = std::make_unique<Stack>(blocks, width);
  }
  const int64_t scoped_peak = max_memory_allocated() - base;
  // Every block was followed by another slot (the last one by ln_f): all are quantized.
  EXPECT_EQ(BitsandbytesPrecision::quantized_stats(*model).layers, 2 * blocks);
  // At most two blocks exist in float32 at a time; the others' 8 w^2 floats are saved, less
  // what their 4.5-bit copies take.
  const int64_t block_bytes = 8 * width * width * 4;
  EXPECT_LT(scoped_peak, full_peak - (blocks - 2) * block_bytes * 8 / 10)
      << scoped_peak << " vs " << full_peak;
  plugin.convert_module(*model);  // nothing left to do, and no error
  Generator g(6);
  EXPECT_EQ(model->forward(uniform({2, width}, -1, 1, kFloat32, &g)).shape(), (Shape{2, width}));
  // With ignored names the scope leaves everything to convert_module.
  BitsandbytesPrecision ignoring("nf4", std::nullopt, {"h0"});
  EXPECT_EQ(ignoring.module_init_context(), nullptr);
}

TEST(BitsandbytesPrecision, ForwardContextAutocastsToTheComputeDtype) {
  BitsandbytesPrecision bf16("nf4");
  {
    ScopePtr s = bf16.forward_context();
    EXPECT_TRUE(amp::is_autocast_enabled());
    EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  BitsandbytesPrecision fp32("nf4", kFloat32);
  EXPECT_EQ(fp32.forward_context(), nullptr);
}

// QLoRA: gradients through a frozen NF4 base equal those through an nn::Linear holding the
// dequantized weight (the 4-bit layer computes x W_dq^T + b).
TEST(BitsandbytesPrecision, LoraOnA4bitBaseMatchesLoraOnTheDequantizedWeight) {
  manual_seed(3);
  auto linear = std::make_shared<nn::Linear>(64, 16);
  BitsandbytesPrecision plugin("nf4-dq", kFloat32);
  auto q = std::dynamic_pointer_cast<quant::Linear4bit>(plugin.quantize(*linear));
  ASSERT_NE(q, nullptr);
  auto dense = std::make_shared<nn::Linear>(64, 16);
  {
    NoGradGuard no_grad;  // parameters are written outside the graph
    Tensor(dense->weight).copy_(q->dequantized_weight(kFloat32));
    Tensor(dense->bias).copy_(linear->bias);
  }

  Generator g(4);
  const Tensor b_init = uniform({16, 4}, -0.5, 0.5, kFloat32, &g);
  nn::LoRALinear a(q, {64, 16}, {.r = 4, .alpha = 8});
  nn::LoRALinear b(dense, {64, 16}, {.r = 4, .alpha = 8});
  {
    NoGradGuard no_grad;
    Tensor(b.lora_A()->weight).copy_(a.lora_A()->weight);
    Tensor(a.lora_B()->weight).copy_(b_init);
    Tensor(b.lora_B()->weight).copy_(b_init);
  }
  Tensor x1 = uniform({3, 64}, -1, 1, kFloat32, &g);
  Tensor x2 = x1.clone();
  x1.requires_grad_(true);
  x2.requires_grad_(true);
  Tensor ya = a.forward(x1), yb = b.forward(x2);
  const std::vector<double> va = vals(ya), vb = vals(yb);
  for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-5);
  sum(mul(ya, ya)).backward();
  sum(mul(yb, yb)).backward();
  auto near = [](const Tensor& p, const Tensor& q2, const char* what) {
    const std::vector<double> u = vals(p), w = vals(q2);
    ASSERT_EQ(u.size(), w.size());
    for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], w[i], 1e-4) << what << i;
  };
  near(x1.grad(), x2.grad(), "x");
  near(a.lora_A()->weight.grad(), b.lora_A()->weight.grad(), "A");
  near(a.lora_B()->weight.grad(), b.lora_B()->weight.grad(), "B");
}

}  // namespace
}  // namespace mantissa::train
