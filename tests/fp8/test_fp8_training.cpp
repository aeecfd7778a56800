// A small transformer-style block built from FP8 layers (LayerNormLinear -> GELU -> Linear)
// learns a fixed random map under both transformer-engine precisions: the loss falls, the
// scales move away from 1 and stay finite. Covers the fp16-weights variant, which has no
// loss scaler (as in Lightning).
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/core/allocator.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/layer_norm.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa {
namespace {

struct Block : nn::Module {
  Block() : Module("Block") {
    ln_fc = register_module(
        "ln_fc", std::make_shared<fp8::LayerNormLinear>(32, 64, true, 1e-5, kFloat32, 8));
    proj = register_module("proj", std::make_shared<fp8::Linear>(64, 32, true, kFloat32, 8));
  }
  Tensor forward(const Tensor& x) override { return (*proj)(gelu((*ln_fc)(x))); }
  std::shared_ptr<fp8::LayerNormLinear> ln_fc;
  std::shared_ptr<fp8::Linear> proj;
};

// Mean loss of the first and the last 20 of `steps` AdamW steps.
std::pair<double, double> fit(const std::string& precision, int steps) {
  manual_seed(1);
  Block model;
  train::TransformerEngineOptions o;
  o.recipe.amax_history_len = 8;
  train::TransformerEnginePrecision plugin(precision, o);
  plugin.convert_module(model);
  EXPECT_EQ(model.proj->weight.dtype(), plugin.param_dtype());
  const Tensor map = mul(randn({32, 32}), 0.3);
  optim::AdamW opt(model.parameters(), 3e-3);
  double first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    const Tensor x = randn({64, 32});
    const Tensor target = matmul(x, map);
    data::Example b = plugin.convert_input({x, target});
    Tensor loss;
    {
      train::ScopePtr scope = plugin.forward_context();
      loss = mse_loss(model.forward(b.input).to(kFloat32), b.target.to(kFloat32));
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    const double l = loss.item();
    EXPECT_TRUE(std::isfinite(l)) << precision << " step " << s;
    if (s < 20) first += l / 20;
    if (s >= steps - 20) last += l / 20;
  }
  for (int slot = 0; slot < 3; ++slot) {
    const float sc = model.proj->fp8_state()->scale_of(slot);
    EXPECT_TRUE(std::isfinite(sc) && sc != 1.0f) << precision << " slot " << slot;
  }
  return {first, last};
}

TEST(Fp8Training, LossFallsWithBf16Weights) {
  const auto [first, last] = fit("transformer-engine", 300);
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
}

TEST(Fp8Training, LossFallsWithFp16WeightsAndNoLossScaler) {
  const auto [first, last] = fit("transformer-engine-float16", 300);
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
}

}  // namespace
}  // namespace mantissa

namespace mantissa {
namespace {

// What a forward keeps alive for backward: the FP8 Linear holds one byte per input element
// (its FP8 copy) where the bf16 Linear holds the two-byte input itself.
TEST(Fp8Training, SavedActivationsAreOneBytePerElement) {
  const int64_t rows = 512, in = 256, out = 256;
  auto held_after_forward = [&](nn::Module& layer, bool fp8) {
    Tensor y;
    int64_t before = 0;
    {
      Tensor x = randn({rows, in}).to(kBFloat16);
      x.requires_grad_(false);  // only the weight needs a gradient: x is saved for wgrad
      before = memory_allocated();
      std::unique_ptr<fp8::Fp8Autocast> ac;
      fp8::DelayedScaling r4;  // the layer's history length (another would resize it)
      r4.amax_history_len = 4;
      if (fp8) ac = std::make_unique<fp8::Fp8Autocast>(true, r4);
      y = layer(x);
    }
    // x is gone; what remains is y plus whatever backward keeps, minus nothing of x.
    return memory_allocated() - before + rows * in * 2 - y.nbytes();
  };
  nn::Linear plain(in, out, true, kBFloat16);
  fp8::Linear f8(in, out, true, kBFloat16, 4);
  const int64_t plain_saved = held_after_forward(plain, false);
  const int64_t fp8_saved = held_after_forward(f8, true);
  EXPECT_GE(plain_saved, rows * in * 2);  // the bf16 input
  // The FP8 input and FP8 weight (and allocator rounding), well under the bf16 input. Where
  // fp8_gemm widens codes to bf16 for oneDNN (AVX-512 BF16 / AMX), the weight cache also keeps
  // the weight's widened codes (2 bytes each) for the step's GEMMs; the input stays 1 byte.
  const bool widens = fp8::gemm_widens_codes();
  EXPECT_LE(fp8_saved, rows * in + in * out * (widens ? 3 : 1) + 4096);
  std::printf("saved for backward: bf16 Linear %lld bytes, FP8 Linear %lld bytes\n",
              static_cast<long long>(plain_saved), static_cast<long long>(fp8_saved));
}

}  // namespace
}  // namespace mantissa
