// quant::Linear4bit (NF4, NF4-DQ) and quant::Linear8bitLt forward + backward w.r.t. the input (the
// QLoRA case: frozen weight, no weight gradient) against nn::Linear in fp32 with the same
// input-gradient-only backward, at GPT-sized shapes. docs/quantization.md.
//
//   build/bench_linear4bit --benchmark_min_time=0.5s
#include <benchmark/benchmark.h>

#include "mantissa/mantissa.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"

namespace {

using namespace mantissa;

enum class Kind { kFp32, kNf4Fp32, kNf4Bf16, kNf4DqFp32, kInt8 };

struct ShapeCase {
  const char* name;
  int64_t tokens, in, out;
};
constexpr ShapeCase kShapes[] = {
    {"gpt_qkv_768x2304_t512", 512, 768, 2304},
    {"gpt_fc_768x3072_t512", 512, 768, 3072},
    {"gpt_proj_3072x768_t512", 512, 3072, 768},
};

void BM_FwdBwd(benchmark::State& state, ShapeCase sc, Kind kind) {
  manual_seed(0);
  auto lin = std::make_shared<nn::Linear>(sc.in, sc.out, true, kFloat32);
  std::shared_ptr<nn::Module> layer = lin;
  using quant::Linear4bit;
  using QF = QuantFormat;
  if (kind == Kind::kNf4Fp32) layer = Linear4bit::from_linear(*lin, {QF::kNf4, false, kFloat32});
  if (kind == Kind::kNf4Bf16) layer = Linear4bit::from_linear(*lin, {QF::kNf4, false, kBFloat16});
  if (kind == Kind::kNf4DqFp32) layer = Linear4bit::from_linear(*lin, {QF::kNf4, true, kFloat32});
  if (kind == Kind::kInt8)
    layer = quant::Linear8bitLt::from_linear(*lin, {quant::Int8Mode::kInference, 6.0f, kFloat32});
  if (kind == Kind::kFp32) lin->weight.requires_grad_(false);  // input gradient only, as QLoRA
  Tensor x = randn({sc.tokens, sc.in});
  x.requires_grad_(true);
  const Tensor g = randn({sc.tokens, sc.out});
  for (auto _ : state) {
    Tensor y = layer->forward(x);
    y.backward(g);
    x.reset_grad();
    layer->zero_grad();
  }
}

const bool registered = [] {
  const std::pair<Kind, const char*> kinds[] = {{Kind::kFp32, "fp32"},
                                                {Kind::kNf4Fp32, "nf4_fp32compute"},
                                                {Kind::kNf4Bf16, "nf4_bf16compute"},
                                                {Kind::kNf4DqFp32, "nf4dq_fp32compute"},
                                                {Kind::kInt8, "int8"}};
  for (const auto& sc : kShapes)
    for (const auto& [k, name] : kinds)
      benchmark::RegisterBenchmark((std::string("Linear/") + sc.name + "/" + name).c_str(),
                                   BM_FwdBwd, sc, k)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
