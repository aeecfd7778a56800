// quant::Linear4bit: forward against the dequantized fp32 reference, gradients against finite
// differences, frozen weight, construction without a full-precision weight, memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/generator.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"
#include "mantissa/quant/quantize.h"
#include "support/test_util.h"

namespace mantissa::quant {
namespace {

Linear4bitOptions opts(FormatId f, bool dq, DType cd) { return {f, dq, cd, 64}; }

TEST(Linear4bit, ForwardMatchesDequantizedReference) {
  Generator gen(3);
  nn::Linear lin(96, 40, true, kFloat32, &gen);
  for (auto f : {FormatId::kNf4, FormatId::kFp4}) {
    for (bool dq : {false, true}) {
      auto q = Linear4bit::from_linear(lin, opts(f, dq, kFloat32));
      const Tensor x = randn({2, 7, 96}, kFloat32, &gen);
      const Tensor want = nn::functional::linear(x, q->dequantized_weight(), q->bias);
      const Tensor got = q->forward(x);
      EXPECT_EQ(got.shape(), (Shape{2, 7, 40}));
      const auto a = got.to_vector<float>(), b = want.to_vector<float>();
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f);
      // Quantization error of the weight itself is what 4 bits allow.
      const auto w = lin.weight.to_vector<float>(), wq = q->dequantized_weight().to_vector<float>();
      double err = 0, ref = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        err += (w[i] - wq[i]) * (w[i] - wq[i]);
        ref += w[i] * w[i];
      }
      EXPECT_LT(std::sqrt(err / ref), 0.2) << formats::format_name(f);
    }
  }
}

// docs/qlora.md: "the base can be an nn::Linear, a quant::Linear4bit or a quant::Linear8bitLt".
// The quantized layers register themselves with apply_lora, so a program that uses them
// directly, without a BitsandbytesPrecision, can wrap them (not "no layer matched ... the
// model's Linear-like layers are: []"). (Each ctest runs this in a fresh process, where no
// plugin was ever built.)
TEST(Linear4bit, LoraWrapsQuantizedLayersWithoutThePlugin) {
  Generator gen(5);
  nn::Linear lin(32, 16, true, kFloat32, &gen);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(Linear4bit::from_linear(lin, opts(FormatId::kNf4, true, kFloat32)));
  seq->push_back(std::make_shared<Linear8bitLt>(32 / 2, 8, true, Linear8bitOptions{}, &gen));
  const std::vector<std::string> wrapped = nn::apply_lora(*seq, {.r = 4, .alpha = 8, .gen = &gen});
  EXPECT_EQ(wrapped, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(nn::mark_only_lora_as_trainable(*seq), 4 * 32 + 16 * 4 + 4 * 16 + 8 * 4);
  // A fresh adapter leaves the output as it was; the adapters get gradients.
  const Tensor x = randn({3, 32}, kFloat32, &gen);
  const Tensor y = seq->forward(x);
  EXPECT_EQ(y.shape(), (Shape{3, 8}));
  sum(y).backward();
  for (const auto& [name, p] : seq->named_parameters()) {
    if (name.find("lora_") != std::string::npos) {
      EXPECT_TRUE(p.grad().defined()) << name;
    }
  }
}

TEST(Linear4bit, ComputeDtypesAndOutputDtype) {
  Generator gen(4);
  nn::Linear lin(128, 32, true, kFloat32, &gen);
  const Tensor x = randn({5, 128}, kFloat32, &gen);
  auto ref = Linear4bit::from_linear(lin, opts(FormatId::kNf4, false, kFloat32));
  const auto want = ref->forward(x).to_vector<float>();
  for (DType cd : {kBFloat16, kFloat16}) {
    auto q = Linear4bit::from_linear(lin, opts(FormatId::kNf4, false, cd));
    const Tensor y = q->forward(x);
    EXPECT_EQ(y.dtype(), kFloat32);  // back in the input's dtype
    const auto got = y.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 0.03 + 0.02 * std::fabs(want[i]));
    EXPECT_EQ(q->forward(x.to(kBFloat16)).dtype(), kBFloat16);
  }
  EXPECT_THROW(Linear4bit(8, 8, true, opts(FormatId::kNf4, false, kFloat64)), Error);
}

TEST(Linear4bit, WeightIsFrozenBiasTrains) {
  Linear4bit q(64, 16, true, opts(FormatId::kNf4, true, kFloat32));
  const auto params = q.named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].first, "bias");
  const auto keys = q.state_dict().keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"bias", "weight", "weight.absmax", "weight.quant_map",
                                            "weight.nested_absmax", "weight.nested_quant_map",
                                            "weight.quant_state.bitsandbytes__nf4"}));
  // Module::to leaves the quantized buffers alone.
  q.to(kBFloat16);
  EXPECT_EQ(q.state_dict().at("weight.nested_absmax").dtype(), kFloat32);
  EXPECT_EQ(q.bias.dtype(), kBFloat16);
}

// Gradients w.r.t. input and bias against central differences of sum(y * r).
TEST(Linear4bit, GradientsMatchFiniteDifferences) {
  Generator gen(5);
  for (bool dq : {false, true}) {
    Linear4bit q(64, 12, true, opts(FormatId::kFp4, dq, kFloat32), &gen);
    const Tensor x0 = randn({3, 64}, kFloat64, &gen).to(kFloat32);
    const Tensor r = randn({3, 12}, kFloat32, &gen);
    Tensor x = x0.clone().requires_grad_();
    sum(q.forward(x) * r).backward();
    const auto gx = x.grad().to_vector<float>();
    const auto gb = q.bias.grad().to_vector<float>();
    auto loss = [&](const Tensor& xi) {
      NoGradGuard ng;
      return sum((q.forward(xi) * r).to(kFloat64)).item();
    };
    const double eps = 1e-2;
    for (int64_t i = 0; i < x0.numel(); i += 7) {
      Tensor xp = x0.clone(), xm = x0.clone();
      xp.data<float>()[i] += static_cast<float>(eps);
      xm.data<float>()[i] -= static_cast<float>(eps);
      const double fd = (loss(xp) - loss(xm)) / (2 * eps);
      EXPECT_NEAR(gx[i], fd, 2e-3) << "x[" << i << "]";
    }
    const auto rs = sum(r, {0}).to_vector<float>();
    for (size_t j = 0; j < gb.size(); ++j) EXPECT_NEAR(gb[j], rs[j], 1e-5);
    q.zero_grad();
  }
}

TEST(Linear4bit, DrawnLayerEqualsQuantizedLinearWithSameSeed) {
  Generator a(11), b(11);
  Linear4bit drawn(200, 24, true, opts(FormatId::kNf4, true, kBFloat16), &a);
  nn::Linear lin(200, 24, true, kFloat32, &b);
  auto from = Linear4bit::from_linear(lin, opts(FormatId::kNf4, true, kBFloat16));
  const nn::StateDict want = from->state_dict();
  for (const auto& [k, t] : drawn.state_dict()) {
    const Tensor& u = want.at(k);
    ASSERT_EQ(t.nbytes(), u.nbytes()) << k;
    EXPECT_EQ(0, std::memcmp(t.data_ptr(), u.data_ptr(), t.nbytes())) << k;
  }
}

TEST(Linear4bit, PeakMemoryStaysNearTheQuantizedSize) {
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  Linear4bit q(1024, 1024, true, opts(FormatId::kNf4, true, kBFloat16));
  const int64_t held = memory_allocated() - before;
  const int64_t peak = max_memory_allocated() - before;
  const int64_t n = 1024 * 1024;
  EXPECT_EQ(q.weight_stored_bytes(), n / 2 + n / 64 + 4 * (n / 64 / 256) + 4);
  EXPECT_NEAR(8.0 * q.weight_stored_bytes() / n, 4.127, 0.002);
  EXPECT_LT(held, n * 4 / 7);     // far below the 4 MiB an fp32 weight takes
  EXPECT_LT(peak, held + n / 8);  // no full-precision copy (4n bytes) on the way
}

// Where the weight is dequantized for the product (every CPU above the AVX2 level, and
// MANTISSA_GEMM=onednn), it is dequantized a chunk of output rows at a time: with a small chunk
// budget the forward and the input gradient equal the unchunked ones up to the fp32 order of
// the sums (oneDNN may block K differently for a narrower product: on AVX-512 the forward came
// out bit for bit, on Zen 3's AVX2 sgemm it differs in the last bits; the gradient also sums
// the chunks), and a step's peak holds no more of the dequantized weight than one chunk.
TEST(Linear4bit, DequantizedInChunksNoLargerThanTheBudget) {
  // The dequantizing path on every CPU (on the AVX2 level the default decodes in the packing).
  const kernels::GemmBackend saved_backend = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
  Generator gen(9);
  const int64_t in_f = 256, out_f = 384;
  nn::Linear lin(in_f, out_f, true, kFloat32, &gen);
  for (DType cd : {kFloat32, kBFloat16}) {
    auto q = Linear4bit::from_linear(lin, opts(FormatId::kNf4, true, cd));
    const Tensor x0 = randn({8, in_f}, kFloat32, &gen).to(cd);
    auto run = [&](int64_t budget, int64_t* peak) {
      const int64_t saved = four_bit_chunk_bytes();
      set_four_bit_chunk_bytes(budget);
      Tensor x = x0.detach();
      x.requires_grad_(true);
      const int64_t before = memory_allocated();
      reset_peak_memory_stats();
      const Tensor y = linear_4bit(x, q->quantized_weight(), q->bias.detach().to(cd));
      sum(mul(y.to(kFloat32), y.to(kFloat32))).backward();
      *peak = max_memory_allocated() - before;
      set_four_bit_chunk_bytes(saved);
      return std::make_pair(y.to(kFloat32).to_vector<float>(),
                            x.grad().to(kFloat32).to_vector<float>());
    };
    int64_t peak_whole = 0, peak_chunked = 0;
    const auto whole = run(int64_t{1} << 30, &peak_whole);
    const int64_t item = static_cast<int64_t>(cd.itemsize());
    const int64_t budget = 64 * in_f * item;  // 64 output rows a chunk: 6 chunks
    const auto chunked = run(budget, &peak_chunked);
    ASSERT_EQ(chunked.first.size(), whole.first.size());
    // fp32: a few ulps of reassociation; bf16 output: at most one rounding step apart.
    const float fwd_tol = cd == kFloat32 ? 1e-5f : 8e-3f;
    for (size_t i = 0; i < whole.first.size(); ++i)
      EXPECT_NEAR(chunked.first[i], whole.first[i], fwd_tol * (1 + std::fabs(whole.first[i])))
          << cd.name() << " " << i;
    ASSERT_EQ(chunked.second.size(), whole.second.size());
    for (size_t i = 0; i < whole.second.size(); ++i)
      EXPECT_NEAR(chunked.second[i], whole.second[i], 2e-2f * (1 + std::fabs(whole.second[i])))
          << cd.name() << " " << i;
    // The whole dequantized weight is out_f * in_f * item bytes; chunked, a sixth of it exists
    // at once. The peaks also hold activations, gradients and, on CPUs without the compute
    // dtype's arithmetic, widened copies, so the check is that at least a quarter of the
    // weight's size was saved.
    if (cd == kBFloat16 && kernels::quant::amx_bf16_usable()) {
      // The AMX kernels take these 8 rows whatever the budget, decoding no more than 64 rows of
      // W at a time: no dequantized weight in either peak.
      EXPECT_LT(peak_whole, out_f * in_f * item / 2) << "peak " << peak_whole;
      EXPECT_LT(peak_chunked, out_f * in_f * item / 2) << "peak " << peak_chunked;
      continue;
    }
    EXPECT_LT(peak_chunked, peak_whole - (out_f * in_f * item) / 4)
        << cd.name() << ": peaks " << peak_chunked << " vs " << peak_whole;
  }
  kernels::set_gemm_backend(saved_backend);
}

// On CPUs with native bf16 the input gradient, and the forward from 1024 rows, dequantize the
// weight a chunk at a time straight into oneDNN's tiled layout for their product; on AMX CPUs
// the products of up to 768 rows run on mantissa's own AMX tiles (W decoded 16 rows at a time).
// The results are the plain products on dequantize(w) (bias included), bit for bit, whole or in
// chunks (a chunk's product covers its output columns over all of K): every path sums each k
// tile of 32 in order with the same TDPBF16PS (or VDPBF16PS) steps and rounds once.
TEST(Linear4bit, TiledProductsEqualPlainProducts) {
  if (!has_native_bf16()) GTEST_SKIP() << "no AVX-512 BF16 or AMX: the plain product runs";
  const kernels::GemmBackend saved_backend = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
  const int64_t saved_budget = four_bit_chunk_bytes();
  Generator gen(4);
  for (auto [rows, in_f, out_f] : {std::tuple<int64_t, int64_t, int64_t>{64, 784, 1024},
                                   {24, 200, 96},
                                   {1100, 130, 70},
                                   {1100, 256, 320},
                                   {800, 200, 190}}) {
    nn::Linear lin(in_f, out_f, true, kFloat32, &gen);
    auto q = Linear4bit::from_linear(lin, opts(FormatId::kNf4, true, kBFloat16));
    Tensor x0 = randn({rows, in_f}, kFloat32, &gen).to(kBFloat16);
    const Tensor g = randn({rows, out_f}, kFloat32, &gen).to(kBFloat16);
    const Tensor w = q->dequantized_weight(kBFloat16);
    const Tensor want_y = nn::functional::linear(x0, w, q->bias.detach().to(kBFloat16));
    const Tensor want = matmul(g, w);
    // The default budget (one chunk for these weights), then 64 lines of W per chunk.
    for (int64_t budget : {saved_budget, 64 * std::min(in_f, out_f) * 2}) {
      set_four_bit_chunk_bytes(budget);
      Tensor x = x0.detach();
      x.requires_grad_(true);
      const Tensor y = q->forward(x);
      y.backward(g);
      ASSERT_EQ(y.shape(), want_y.shape());
      EXPECT_EQ(0, std::memcmp(y.data_ptr(), want_y.data_ptr(), want_y.nbytes()))
          << "forward " << rows << " x " << in_f << " -> " << out_f << ", budget " << budget;
      ASSERT_EQ(x.grad().shape(), want.shape());
      EXPECT_EQ(0, std::memcmp(x.grad().data_ptr(), want.data_ptr(), want.nbytes()))
          << "input gradient " << rows << " x " << in_f << " -> " << out_f << ", budget " << budget;
    }
  }
  set_four_bit_chunk_bytes(saved_budget);
  kernels::set_gemm_backend(saved_backend);
}

// A bf16 step never holds the dequantized weight: at 64 and 512 rows (AMX CPUs: W decoded 64
// rows per thread at a time into tiles; AVX2: inside the GEMM's packing; else chunks) and at 1024
// rows (chunks of at most four_bit_chunk_bytes(), 1 MiB). Its peak is the step's own tensors
// (y, x's gradient, the decoded absmax) plus at most one chunk and its product.
TEST(Linear4bit, StepsHoldNoDequantizedWeight) {
  const kernels::GemmBackend saved_backend = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kAuto);
  ASSERT_EQ(four_bit_chunk_bytes(), int64_t{1} << 20);  // the documented default
  Generator gen(10);
  const int64_t in_f = 2048, out_f = 2048;
  const int64_t weight_bytes = out_f * in_f * 2;  // 8 MiB in bf16
  auto q = Linear4bit::from_linear(nn::Linear(in_f, out_f, true, kFloat32, &gen),
                                   opts(FormatId::kNf4, true, kBFloat16));
  for (int64_t rows : {64, 512, 1024}) {
    Tensor x = randn({rows, in_f}, kFloat32, &gen).to(kBFloat16);
    x.requires_grad_(true);
    const Tensor g = randn({rows, out_f}, kFloat32, &gen).to(kBFloat16);
    const int64_t before = memory_allocated();
    reset_peak_memory_stats();
    q->forward(x).backward(g);
    const int64_t peak = max_memory_allocated() - before;
    const int64_t own = rows * (out_f + in_f) * 2 + out_f * in_f / 64 * 4;  // y, dx, absmax
    // Without a bf16 GEMM kernel (the portable paths) each chunk's product widens its bf16
    // operands to fp32: the activation (rows x 2048) and the chunk (two chunks' bytes).
    const bool widens =
        !kernels::gemm_native_supported(kBFloat16) && !kernels::onednn_native_bf16();
    const int64_t widened = widens ? rows * in_f * 4 + 2 * four_bit_chunk_bytes() : 0;
    // One chunk (1 MiB) and its product (rows x 256 or 512 columns): well under half the weight.
    EXPECT_LT(peak, own + widened + weight_bytes / 2) << rows << " rows: peak " << peak;
  }
  kernels::set_gemm_backend(saved_backend);
}

// Inside an autocast region of its compute dtype the layer returns that dtype, as autocast's
// linear does (what follows it then saves half-size activations, as under bf16-mixed); the
// values are those it returns elsewhere, in its input's dtype.
TEST(Linear4bit, ReturnsTheAutocastDtypeInsideARegionOfItsComputeDtype) {
  Generator gen(5);
  nn::Linear lin(64, 16, true, kFloat32, &gen);
  auto q = Linear4bit::from_linear(lin, opts(FormatId::kNf4, false, kBFloat16));
  const Tensor x = randn({4, 64}, kFloat32, &gen);
  const Tensor plain = q->forward(x);
  EXPECT_EQ(plain.dtype(), kFloat32);
  {
    amp::autocast region(DeviceType::kCPU, kBFloat16);
    const Tensor y = q->forward(x);
    ASSERT_EQ(y.dtype(), kBFloat16);
    EXPECT_EQ(y.to(kFloat32).to_vector<float>(), plain.to_vector<float>());
    EXPECT_EQ(q->forward(x.to(kFloat64)).dtype(), kFloat64);  // autocast leaves float64 alone
  }
  {
    amp::autocast region(DeviceType::kCPU, kFloat16);  // not the layer's compute dtype
    EXPECT_EQ(q->forward(x).dtype(), kFloat32);
  }
}

TEST(Linear4bit, RejectsMismatchedInput) {
  Linear4bit q(32, 8, false, opts(FormatId::kNf4, false, kFloat32));
  EXPECT_THROW(q.forward(ones({2, 31})), Error);
  EXPECT_THROW(q.forward(ones({2, 32}, kInt32)), Error);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Full-precision weights loaded into a layer that is already 4-bit (a module that loads its
// pretrained weights in configure_model, after BitsandbytesPrecision quantized what it built):
// the error says so and how to load them, instead of listing the 4-bit tensors as missing.
TEST(Linear4bit, LoadingFullPrecisionWeightsSaysTheLayerIsQuantized) {
  manual_seed(3);
  nn::Sequential net;
  net.push_back(std::make_shared<nn::Linear>(8, 4));
  const nn::StateDict full = net.state_dict();
  nn::Sequential quantized;
  quantized.push_back(
      Linear4bit::from_linear(dynamic_cast<const nn::Linear&>(*net.children()[0]), {}));
  const auto before = quantized.state_dict().at("0.weight.absmax").clone();
  const std::string what = mantissa::testing::error_of([&] { quantized.load_state_dict(full); });
  for (const char* part : {"\"0.weight\" is a full-precision weight", "[4, 8]", "already 4-bit",
                           "before", "docs/qlora.md"})
    EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  EXPECT_TRUE(same_bytes(quantized.state_dict().at("0.weight.absmax"), before));
}

// Quantized weights loaded into a layer of another kind work as before: the 4-bit file into a
// 4-bit layer.
TEST(Linear4bit, QuantizedWeightsStillLoadIntoA4bitLayer) {
  manual_seed(4);
  nn::Linear lin(8, 4);
  auto a = Linear4bit::from_linear(lin, {});
  manual_seed(5);
  nn::Linear other(8, 4);
  auto b = Linear4bit::from_linear(other, {});
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(same_bytes(b->state_dict().at("weight"), a->state_dict().at("weight")));
}

}  // namespace
}  // namespace mantissa::quant
