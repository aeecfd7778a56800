// bitsandbytes' 4-bit weights on a GPU: the decode (plain and double-quantized absmax) gives the
// CPU's values bit for bit; quantizing GPU values gives the host's codes; a Linear4bit moved to
// the GPU computes what it computes on the CPU (outputs and the input and bias gradients), keeps
// its code tables and quant state in host memory, and refuses a mismatched device; and the
// Trainer's nf4 / nf4-dq run on a GPU follows the same run on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../train/tiny_module.h"
#include "cuda_op_check.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/quantize.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::rel_error;

quant::FourBitOptions options_of(FormatId f, bool dq, int64_t blocksize) {
  return quant::FourBitOptions{f, blocksize, dq};
}

QuantizedTensor to_gpu(QuantizedTensor q) {
  q.data = q.data.to(kGpu);
  q.absmax = q.absmax.to(kGpu);
  if (q.has_nested) q.nested.absmax = q.nested.absmax.to(kGpu);
  return q;
}

TEST(CudaFourBit, DequantizeMatchesTheCpuBitForBit) {
  MANTISSA_REQUIRE_GPU();
  // An odd element count (the last byte holds one code) over several blocks and, for the
  // double-quantized absmax, more than one group of 256 blocks.
  const Tensor values = randn_cpu({129, 301}, 1, 0.7);
  for (FormatId f : {FormatId::kNf4, FormatId::kFp4}) {
    for (bool dq : {false, true}) {
      for (int64_t bs : {64, 128}) {
        SCOPED_TRACE(std::string(formats::format_name(f)) + (dq ? "-dq" : "") + " blocksize " +
                     std::to_string(bs));
        const QuantizedTensor q = quant::quantize_4bit(values, options_of(f, dq, bs));
        const QuantizedTensor g = to_gpu(q);
        const Tensor am = quant::block_absmax(g);
        ASSERT_TRUE(am.is_cuda());
        EXPECT_EQ(rel_error(am, quant::block_absmax(q)), 0.0);
        for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
          SCOPED_TRACE(dt.name());
          const Tensor out = quant::dequantize(g, dt);
          ASSERT_TRUE(out.is_cuda());
          ASSERT_EQ(out.dtype(), dt);
          ASSERT_EQ(out.shape(), q.shape);
          EXPECT_EQ(rel_error(out, quant::dequantize(q, dt)), 0.0);
        }
      }
    }
  }
}

TEST(CudaFourBit, QuantizingGpuValuesGivesTheHostsCodes) {
  MANTISSA_REQUIRE_GPU();
  const Tensor values = randn_cpu({64, 100}, 2).to(kBFloat16);
  const quant::FourBitOptions o = options_of(FormatId::kNf4, true, 64);
  const QuantizedTensor g = quant::quantize_4bit(values.to(kGpu), o);
  const QuantizedTensor h = quant::quantize_4bit(values, o);
  EXPECT_TRUE(g.data.is_cuda());
  EXPECT_TRUE(g.absmax.is_cuda());
  EXPECT_TRUE(g.nested.absmax.is_cuda());
  EXPECT_EQ(g.dtype, kBFloat16);
  EXPECT_EQ(rel_error(g.data, h.data), 0.0);
  EXPECT_EQ(rel_error(g.absmax, h.absmax), 0.0);
  EXPECT_EQ(rel_error(g.nested.absmax, h.nested.absmax), 0.0);
  EXPECT_EQ(g.nested.offset, h.nested.offset);
}

TEST(CudaLinear4bit, ForwardAndGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType cd : {kBFloat16, kFloat16, kFloat32}) {
    for (bool dq : {false, true}) {
      SCOPED_TRACE(std::string(cd.name()) + (dq ? " nf4-dq" : " nf4"));
      const quant::Linear4bitOptions o{FormatId::kNf4, dq, cd, 64};
      Generator g1(5), g2(5);
      quant::Linear4bit cpu(200, 96, true, o, &g1);
      quant::Linear4bit gpu(200, 96, true, o, &g2);
      gpu.to(kGpu);
      // The codes and scales moved; the code tables and the JSON quant state did not.
      for (const auto& [name, t] : gpu.named_buffers()) {
        SCOPED_TRACE(name);
        const bool host = name.find("quant_map") != std::string::npos ||
                          name.find("quant_state") != std::string::npos;
        EXPECT_EQ(t.is_cuda(), !host);
      }
      EXPECT_TRUE(gpu.bias.is_cuda());
      const Tensor x_cpu = randn_cpu({3, 17, 200}, 6).requires_grad_(true);
      const Tensor x_gpu = x_cpu.detach().to(kGpu).requires_grad_(true);
      const Tensor y_cpu = cpu.forward(x_cpu);
      const Tensor y_gpu = gpu.forward(x_gpu);
      ASSERT_TRUE(y_gpu.is_cuda());
      ASSERT_EQ(y_gpu.dtype(), y_cpu.dtype());
      ASSERT_EQ(y_gpu.shape(), y_cpu.shape());
      const double tol = cd == kFloat32 ? 1e-5 : 2 * cuda_test::tol_of(cd);
      EXPECT_LE(rel_error(y_gpu, y_cpu), tol) << "forward";
      const Tensor w = randn_cpu(y_cpu.shape(), 7);
      sum(mul(y_cpu, w)).backward();
      sum(mul(y_gpu, w.to(kGpu))).backward();
      EXPECT_LE(rel_error(x_gpu.grad(), x_cpu.grad()), tol) << "input gradient";
      EXPECT_LE(rel_error(gpu.bias.grad(), cpu.bias.grad()), tol) << "bias gradient";
      // Its weight decodes to the CPU layer's values bit for bit.
      EXPECT_EQ(rel_error(gpu.dequantized_weight(kFloat32), cpu.dequantized_weight(kFloat32)), 0.0);
    }
  }
}

TEST(CudaLinear4bit, AnInputOnAnotherDeviceIsRefusedNamingBoth) {
  MANTISSA_REQUIRE_GPU();
  quant::Linear4bit layer(32, 16, true, {});
  try {
    (void)layer.forward(randn_cpu({2, 32}, 8).to(kGpu));  // the layer is still on the CPU
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("same device"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  }
}

}  // namespace

namespace train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

std::vector<double> fit_losses(const std::string& precision, const std::string& accelerator,
                               bool adamw8bit = false) {
  TrainerOptions o = quiet_options(precision);
  o.accelerator = accelerator;
  o.seed = 7;
  o.max_epochs = 3;
  Trainer trainer(o);
  manual_seed(7);
  TinyModule module(TinyOptions{.lr = 0.01, .adamw = !adamw8bit, .adamw8bit = adamw8bit});
  data::DataLoader train(testing::tiny_dataset(256, 11), 32);
  trainer.fit(module, train, nullptr);
  EXPECT_EQ(trainer.device(), accelerator == "gpu" ? cuda_device(0) : kCPU);
  for (const auto& p : module.parameters()) EXPECT_EQ(p.device(), trainer.device());
  return trainer.step_losses();
}

TEST(CudaTrainer, FourBitPrecisionsOnTheGpuFollowTheCpuRun) {
  MANTISSA_REQUIRE_GPU();
  for (const std::string precision : {"nf4", "nf4-dq", "fp4"}) {
    SCOPED_TRACE(precision);
    const std::vector<double> cpu = fit_losses(precision, "cpu");
    const std::vector<double> gpu = fit_losses(precision, "gpu");
    ASSERT_EQ(gpu.size(), cpu.size());
    ASSERT_EQ(gpu.size(), 24u);
    double gap = 0;
    for (size_t i = 0; i < gpu.size(); ++i)
      gap = std::max(gap, std::abs(gpu[i] - cpu[i]) / std::max(std::abs(cpu[i]), 1e-6));
    EXPECT_LT(gap, 5e-2);  // bf16 compute on both sides; products summed in another order
  }
}

TEST(CudaTrainer, EightBitOptimizerOnTheGpuFollowsTheCpuRun) {
  MANTISSA_REQUIRE_GPU();
  // nf4 with adamw8bit, as QLoRA runs it: the same updates on both devices (the 8-bit kernels
  // are bit-exact, CudaOptim.EightBitAdamWMatchesTheCpuBitForBit), bf16 products in another order.
  const std::vector<double> cpu = fit_losses("nf4", "cpu", /*adamw8bit=*/true);
  const std::vector<double> gpu = fit_losses("nf4", "gpu", /*adamw8bit=*/true);
  ASSERT_EQ(gpu.size(), cpu.size());
  ASSERT_EQ(gpu.size(), 24u);
  double gap = 0;
  for (size_t i = 0; i < gpu.size(); ++i)
    gap = std::max(gap, std::abs(gpu[i] - cpu[i]) / std::max(std::abs(cpu[i]), 1e-6));
  EXPECT_LT(gap, 5e-2);
  double first = 0, last = 0;  // it learns: the last epoch's mean below the first's
  for (size_t i = 0; i < 8; ++i) first += gpu[i], last += gpu[16 + i];
  EXPECT_LT(last, first);
}

}  // namespace
}  // namespace train
}  // namespace mantissa
