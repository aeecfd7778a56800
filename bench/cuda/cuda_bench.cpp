// mantissa on a CUDA GPU: GEMM throughput at 4096^3 in each dtype (FP8 E4M3 too on 8.9+), and
// training steps of the reference MLP (784-1024-1024-10) in 32-true, 16-mixed and bf16-mixed.
// bench/cuda/run.sh runs this beside bench/cuda/torch_cuda_bench.py (PyTorch eager, the same
// shapes) and prints the ratios; docs/cuda.md has the figures. Lines: "<what> <case> <value>
// <unit>".
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/op_profiler.h"

#include "mantissa/core/cuda.h"
#include "mantissa/fp8/tensor.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/mlp.h"
#include "mantissa/ops/matmul_precision.h"
#include "mantissa/train/graphed_step.h"

namespace mt = mantissa;
using Clock = std::chrono::steady_clock;

namespace {

const mt::Device kGpu = mt::cuda_device(0);

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void bench_gemm(const std::string& name, mt::DType dtype, int64_t n, int reps) {
  mt::Generator gen(1);
  const mt::Tensor a = mt::randn({n, n}, mt::kFloat32, &gen).to(dtype).to(kGpu);
  const mt::Tensor b = mt::randn({n, n}, mt::kFloat32, &gen).to(dtype).to(kGpu);
  for (int i = 0; i < 3; ++i) (void)mt::matmul(a, b);
  mt::cuda::synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) (void)mt::matmul(a, b);
  mt::cuda::synchronize();
  const double t = seconds_since(t0) / reps;
  fmt::print("gemm {} {:.1f} TFLOP/s\n", name, 2.0 * n * n * n / t / 1e12);
}

// The FP8 product of the transformer-engine precision's forward GEMM (E4M3 x E4M3, bf16 out, the
// layer's (M, K) @ (N, K)^T), from codes made once: cuBLASLt's FP8 kernels on 8.9+.
void bench_gemm_fp8(int64_t n, int reps) {
  mt::Generator gen(1);
  const mt::Tensor a = mt::randn({n, n}, mt::kFloat32, &gen).to(kGpu);
  const mt::Tensor b = mt::randn({n, n}, mt::kFloat32, &gen).to(kGpu);
  const mt::fp8::Fp8Tensor qa = mt::fp8::quantize(a, mt::kFloat8_e4m3fn, 64.0f).q;
  const mt::fp8::Fp8Tensor qb = mt::fp8::quantize(b, mt::kFloat8_e4m3fn, 64.0f).q;
  auto run = [&] { (void)mt::fp8::fp8_gemm(qa, false, qb, true, mt::Tensor(), mt::kBFloat16); };
  for (int i = 0; i < 3; ++i) run();
  mt::cuda::synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) run();
  mt::cuda::synchronize();
  const double t = seconds_since(t0) / reps;
  fmt::print("gemm fp8 {:.1f} TFLOP/s\n", 2.0 * n * n * n / t / 1e12);
}

// Where an FP8 Linear's time goes at the 12x768 GPT's shapes (4096 tokens): each piece of
// fp8_linear timed alone (synchronised, mean of 20) beside the bf16 products it replaces.
void bench_fp8_pieces() {
  const int reps = 20;
  auto time_ms = [&](const std::function<void()>& fn) {
    for (int i = 0; i < 3; ++i) fn();
    mt::cuda::synchronize();
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    mt::cuda::synchronize();
    return seconds_since(t0) / reps * 1e3;
  };
  mt::Generator gen(4);
  const int64_t M = 4096;
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{
           {768, 2304}, {768, 768}, {768, 3072}, {3072, 768}}) {
    const mt::Tensor x = mt::randn({M, K}, mt::kFloat32, &gen).to(mt::kBFloat16).to(kGpu);
    const mt::Tensor w = mt::randn({N, K}, mt::kFloat32, &gen).to(mt::kBFloat16).to(kGpu);
    const mt::Tensor b = mt::randn({N}, mt::kFloat32, &gen).to(mt::kBFloat16).to(kGpu);
    const mt::Tensor dy = mt::randn({M, N}, mt::kFloat32, &gen).to(mt::kBFloat16).to(kGpu);
    namespace f8 = mt::fp8;
    // As fp8_linear casts them: with the transposes the backward products read.
    const f8::Fp8Tensor qx = f8::quantize_async(x, mt::kFloat8_e4m3fn, 64.0f, false, true).q;
    const f8::Fp8Tensor qw = f8::quantize_async(w, mt::kFloat8_e4m3fn, 64.0f, false, true).q;
    const f8::Fp8Tensor qdy = f8::quantize_async(dy, mt::kFloat8_e5m2, 1024.0f, false, true).q;
    const double cast_x =
        time_ms([&] { (void)f8::quantize_async(x, mt::kFloat8_e4m3fn, 64.0f, false, true); });
    const double cast_dy =
        time_ms([&] { (void)f8::quantize_async(dy, mt::kFloat8_e5m2, 1024.0f, false, true); });
    const double fwd = time_ms([&] { (void)f8::fp8_gemm(qx, false, qw, true, b, mt::kBFloat16); });
    const double dgrad =
        time_ms([&] { (void)f8::fp8_gemm(qdy, false, qw, false, mt::Tensor(), mt::kBFloat16); });
    const double wgrad =
        time_ms([&] { (void)f8::fp8_gemm(qdy, true, qx, false, mt::Tensor(), mt::kBFloat16); });
    const double bf_fwd = time_ms([&] { (void)mt::matmul(x, w.t()); });
    const double bf_dgrad = time_ms([&] { (void)mt::matmul(dy, w); });
    const double bf_wgrad = time_ms([&] { (void)mt::matmul(dy.t(), x); });
    fmt::print(
        "fp8 {}x{}x{}: cast+transpose x {:.3f} dy {:.3f} | fwd {:.3f} dgrad {:.3f} wgrad {:.3f} ms "
        "| bf16 "
        "fwd {:.3f} dgrad {:.3f} wgrad {:.3f} ms\n",
        M, N, K, cast_x, cast_dy, fwd, dgrad, wgrad, bf_fwd, bf_dgrad, bf_wgrad);
  }
}

// Causal self-attention at the GPT-2-sized model's shape (batch 16, 12 heads of 64, context 256),
// q, k and v strided views of one packed (B, L, 3E) projection as the model has them: forward
// and backward, ms per pass (synchronised, mean of 50). float16 and bfloat16 run the fused
// (flash) kernels, float32 the composed form (cuBLAS products and the fused softmax).
void bench_attention(const std::string& name, mt::DType dtype) {
  const int64_t B = 16, H = 12, L = 256, D = 64;
  mt::Generator gen(5);
  const mt::Tensor qkv =
      mt::randn({B, L, 3 * H * D}, mt::kFloat32, &gen).to(dtype).to(kGpu).requires_grad_(true);
  const mt::Tensor dy = mt::randn({B, H, L, D}, mt::kFloat32, &gen).to(dtype).to(kGpu);
  auto pass = [&] {
    const mt::Tensor p = qkv.view({B, L, 3, H, D}).permute({2, 0, 3, 1, 4});
    const mt::Tensor y = mt::scaled_dot_product_attention(p.select(0, 0), p.select(0, 1),
                                                          p.select(0, 2), mt::Tensor(), 0.0, true);
    y.backward(dy);
  };
  const int reps = 50;
  for (int i = 0; i < 3; ++i) pass();
  mt::cuda::synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) pass();
  mt::cuda::synchronize();
  fmt::print("attn {} {:.3f} ms (forward + backward, causal 16x12x256x64)\n", name,
             seconds_since(t0) / reps * 1e3);
}

// One AdamW step in `precision` of the loss `forward_loss` computes: autocast on the GPU for the
// mixed precisions (float16 or bfloat16), the GradScaler for 16-mixed, as the Trainer's plugins.
mt::Tensor train_step(const std::string& precision, mt::optim::Optimizer& opt,
                      mt::amp::GradScaler& scaler,
                      const std::function<mt::Tensor()>& forward_loss) {
  opt.zero_grad();
  mt::Tensor loss;
  {
    std::optional<mt::amp::autocast> ac;
    if (precision != "32-true")
      ac.emplace(mt::DeviceType::kCUDA, precision == "16-mixed" ? mt::kFloat16 : mt::kBFloat16);
    loss = forward_loss();
  }
  if (precision == "16-mixed") {
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  } else {
    loss.backward();
    opt.step();
  }
  return loss;
}

struct Timing {
  double seconds_per_step;
  double last_loss;
};
// Seconds per step over `steps` after `warmup`, up to the host's read of the last loss.
Timing time_steps(const std::function<mt::Tensor()>& step, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) step();
  mt::cuda::synchronize();
  const auto t0 = Clock::now();
  mt::Tensor last;
  for (int i = 0; i < steps; ++i) last = step();
  const double loss = last.item();  // waits for the GPU
  return {seconds_since(t0) / steps, loss};
}

void bench_mlp(const std::string& precision, int64_t batch, int warmup, int steps) {
  mt::manual_seed(0);
  mt::cuda::reset_peak_memory_stats();
  auto net = mt::models::make_mlp(784, {1024, 1024}, 10, mt::kFloat32);
  net->to(kGpu);
  mt::optim::AdamW opt(net->parameters(), 1e-3);
  mt::amp::GradScaler scaler;
  mt::Generator gen(2);
  const mt::Tensor x = mt::randn({batch, 784}, mt::kFloat32, &gen).to(kGpu);
  const mt::Tensor y = mt::randint(0, 10, {batch}, mt::kInt64, &gen).to(kGpu);
  const Timing t = time_steps(
      [&] {
        return train_step(precision, opt, scaler,
                          [&] { return mt::cross_entropy(net->forward(x), y); });
      },
      warmup, steps);
  fmt::print("mlp {} {:.3f} ms/step (loss {:.4f}, peak {} MiB)\n", precision,
             t.seconds_per_step * 1e3, t.last_loss, mt::cuda::max_memory_allocated() >> 20);
}

// The GPT (mantissa/models/gpt.h) on random bytes: tokens per second of AdamW steps. graphs:
// the forward and backward replayed as one CUDA graph (train::GraphedStep), the optimizer step
// and the scaler eager (not for transformer-engine, whose scaling state lives on the host).
double bench_gpt(const std::string& precision, const mt::models::GPTConfig& cfg, int64_t batch,
                 int warmup, int steps, bool graphs = false) {
  mt::manual_seed(0);
  mt::cuda::reset_peak_memory_stats();
  mt::models::GPT gpt(cfg);
  // transformer-engine: the Trainer's plugin replaces the Linear layers with FP8 ones and makes
  // the weights bf16; each step runs in its forward context (FP8 autocast, bf16 default dtype).
  std::unique_ptr<mt::train::Precision> te;
  if (precision == "transformer-engine") {
    te = mt::train::precision_plugin_from_string(precision, "gpu");
    te->convert_module(gpt);
  }
  gpt.to(kGpu);
  mt::optim::AdamW opt(gpt.parameters(), 3e-4);
  mt::amp::GradScaler scaler;
  mt::Generator gen(3);
  const mt::Tensor tokens =
      mt::randint(0, cfg.vocab, {batch, cfg.context + 1}, mt::kInt64, &gen).to(kGpu);
  const mt::Tensor x = tokens.narrow(1, 0, cfg.context).contiguous();
  const mt::Tensor y = tokens.narrow(1, 1, cfg.context).contiguous();
  std::optional<mt::train::GraphedStep> graphed;
  if (graphs)
    graphed.emplace(gpt.parameters(), [&](const std::vector<mt::Tensor>& in) {
      return mt::models::GPT::loss(gpt.forward(in[0]), in[1]);
    });
  const Timing t = time_steps(
      [&] {
        if (graphed) {
          opt.zero_grad();
          mt::Tensor loss;
          {
            std::optional<mt::amp::autocast> ac;
            if (precision != "32-true")
              ac.emplace(mt::DeviceType::kCUDA,
                         precision == "16-mixed" ? mt::kFloat16 : mt::kBFloat16);
            loss = graphed->run({x, y}, precision == "16-mixed" ? &scaler : nullptr);
          }
          if (precision == "16-mixed") {
            scaler.step(opt);
            scaler.update();
          } else {
            opt.step();
          }
          return loss;
        }
        if (te) {
          opt.zero_grad();
          mt::Tensor loss;
          {
            mt::train::ScopePtr scope = te->forward_context();
            loss = mt::models::GPT::loss(gpt.forward(x), y);
          }
          loss.backward();
          opt.step();
          return loss;
        }
        return train_step(precision, opt, scaler,
                          [&] { return mt::models::GPT::loss(gpt.forward(x), y); });
      },
      warmup, steps);
  fmt::print("gpt{} {}{} {:.3f} ms/step ({:.0f} tokens/s, loss {:.4f}, peak {} MiB)\n", cfg.layers,
             precision, graphs ? "+graphs" : "", t.seconds_per_step * 1e3,
             batch * cfg.context / t.seconds_per_step, t.last_loss,
             mt::cuda::max_memory_allocated() >> 20);
  if (graphed && graphed->is_graphed())
    fmt::print("gpt{} {}+graphs: {} graph nodes\n", cfg.layers, precision, graphed->graph_nodes());
  if (graphed && !graphed->is_graphed())
    fmt::print("gpt{} {}+graphs ran eagerly: {}\n", cfg.layers, precision,
               graphed->fallback_reason());
  return t.seconds_per_step;
}

// The fused (flash) attention against the composed form (MANTISSA_CUDA_ATTENTION=composed) in
// the GPT-2-sized model's training: the same initial weights and batch, `steps` AdamW steps in
// `precision` with each form; prints the first step's largest gradient difference (relative to
// the parameter's largest gradient, the worst parameter named) and the loss every 5 steps.
void attention_check(const std::string& precision, int steps, const std::string& exclude = "") {
  const mt::models::GPTConfig cfg{.context = 256, .layers = 12, .width = 768, .heads = 12};
  auto run = [&](bool composed, std::vector<double>& losses) {
    // "fused" also overrides the FP8 forward's choice of the composed form.
    setenv("MANTISSA_CUDA_ATTENTION", composed ? "composed" : "fused", 1);
    mt::manual_seed(0);
    mt::models::GPT gpt(cfg);
    std::unique_ptr<mt::train::Precision> te;
    if (precision == "transformer-engine") {
      mt::train::PrecisionOptions o{.accelerator = "gpu"};
      if (!exclude.empty()) o.extra["fp8_exclude"] = exclude;
      te = mt::train::make_precision(precision, o);
      te->convert_module(gpt);
    }
    gpt.to(kGpu);
    mt::optim::AdamW opt(gpt.parameters(), 3e-4);
    mt::Generator gen(3);
    const mt::Tensor tokens =
        mt::randint(0, cfg.vocab, {16, cfg.context + 1}, mt::kInt64, &gen).to(kGpu);
    const mt::Tensor x = tokens.narrow(1, 0, cfg.context).contiguous();
    const mt::Tensor y = tokens.narrow(1, 1, cfg.context).contiguous();
    std::vector<std::pair<std::string, mt::Tensor>> first;
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      mt::Tensor loss;
      {
        std::optional<mt::amp::autocast> ac;
        mt::train::ScopePtr scope;
        if (te)
          scope = te->forward_context();
        else
          ac.emplace(mt::DeviceType::kCUDA, mt::kBFloat16);
        loss = mt::models::GPT::loss(gpt.forward(x), y);
      }
      loss.backward();
      if (i == 0)
        for (const auto& [name, p] : gpt.named_parameters())
          if (p.grad().defined()) first.emplace_back(name, p.grad().to(mt::kFloat32).to(mt::kCPU));
      opt.step();
      losses.push_back(loss.item());
    }
    unsetenv("MANTISSA_CUDA_ATTENTION");
    return first;
  };
  std::vector<double> fused, composed;
  const auto gf = run(false, fused);
  const auto gc = run(true, composed);
  std::vector<std::pair<double, std::string>> diffs;
  for (size_t i = 0; i < gf.size() && i < gc.size(); ++i) {
    const std::vector<float> a = gf[i].second.to_vector<float>(),
                             b = gc[i].second.to_vector<float>();
    double num = 0, den = 1e-30, fa = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      num = std::max(num, static_cast<double>(std::abs(a[j] - b[j])));
      den = std::max(den, static_cast<double>(std::abs(b[j])));
      fa = std::max(fa, static_cast<double>(std::abs(a[j])));
    }
    diffs.emplace_back(
        num / den, fmt::format("{} (max |g| fused {:.3g} composed {:.3g})", gf[i].first, fa, den));
  }
  std::sort(diffs.rbegin(), diffs.rend());
  fmt::print("attncheck {}{} step 0: loss fused {:.5f} composed {:.5f}\n", precision,
             exclude.empty() ? "" : " excluding " + exclude, fused[0], composed[0]);
  for (size_t i = 0; i < diffs.size() && i < 4; ++i)
    fmt::print("  gradient difference {:.4f} {}\n", diffs[i].first, diffs[i].second);
  for (const auto& [d, name] : diffs)
    if (name.rfind("h0.attn", 0) == 0 || name.rfind("h11.attn", 0) == 0)
      fmt::print("  gradient difference {:.4f} {}\n", d, name);
  for (int i = 4; i < steps; i += 5)
    fmt::print("attncheck {} step {}: loss fused {:.4f} composed {:.4f}\n", precision, i + 1,
               fused[i], composed[i]);
}

// Where a GPT step's GPU time goes: with CUDA_LAUNCH_BLOCKING=1 every launch waits for its
// kernel, so the op profiler's host times are the kernels' (slower overall; shares only).
void profile_gpt(const std::string& precision, const mt::models::GPTConfig& cfg, int64_t batch) {
  mt::manual_seed(0);
  mt::models::GPT gpt(cfg);
  // transformer-engine: the Trainer's plugin replaces the Linear layers with FP8 ones and makes
  // the weights bf16; each step runs in its forward context (FP8 autocast, bf16 default dtype).
  std::unique_ptr<mt::train::Precision> te;
  if (precision == "transformer-engine") {
    te = mt::train::precision_plugin_from_string(precision, "gpu");
    te->convert_module(gpt);
  }
  gpt.to(kGpu);
  mt::optim::AdamW opt(gpt.parameters(), 3e-4);
  mt::Generator gen(3);
  const mt::Tensor tokens =
      mt::randint(0, cfg.vocab, {batch, cfg.context + 1}, mt::kInt64, &gen).to(kGpu);
  const mt::Tensor x = tokens.narrow(1, 0, cfg.context).contiguous();
  const mt::Tensor y = tokens.narrow(1, 1, cfg.context).contiguous();
  double optimizer_s = 0;
  auto step = [&] {
    opt.zero_grad();
    mt::Tensor loss;
    {
      std::optional<mt::amp::autocast> ac;
      mt::train::ScopePtr scope;
      if (te)
        scope = te->forward_context();
      else if (precision != "32-true")
        ac.emplace(mt::DeviceType::kCUDA, precision == "16-mixed" ? mt::kFloat16 : mt::kBFloat16);
      loss = mt::models::GPT::loss(gpt.forward(x), y);
    }
    loss.backward();
    mt::cuda::synchronize();
    const auto t0 = Clock::now();
    opt.step();
    mt::cuda::synchronize();
    optimizer_s += seconds_since(t0);
  };
  for (int i = 0; i < 3; ++i) step();
  mt::profiling::set_op_timing(true);
  mt::profiling::reset_op_times();
  optimizer_s = 0;
  const int steps = 5;
  for (int i = 0; i < steps; ++i) step();
  mt::profiling::set_op_timing(false);
  std::vector<std::pair<double, std::string>> rows;
  double total = optimizer_s;
  for (const auto& [key, t] : mt::profiling::op_times()) {
    rows.emplace_back(
        t.seconds, fmt::format("{:<9} {:<28} {:>6} calls", key.first, key.second, t.calls / steps));
    total += t.seconds;
  }
  rows.emplace_back(optimizer_s, fmt::format("{:<9} {:<28} {:>6} calls", "step", "AdamW", 1));
  std::sort(rows.rbegin(), rows.rend());
  fmt::print("profile gpt{} {} (per step, launch-blocking)\n", cfg.layers, precision);
  for (size_t i = 0; i < rows.size() && i < 40; ++i)
    fmt::print("  {:8.3f} ms {:5.1f}%  {}\n", rows[i].first / steps * 1e3,
               100 * rows[i].first / total, rows[i].second);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "all";
  if (first == "profile") setenv("CUDA_LAUNCH_BLOCKING", "1", 1);  // before CUDA starts
  if (!mt::cuda::is_available()) {
    fmt::print(stderr, "cuda_bench: {}\n", mt::cuda::unavailable_reason());
    return 2;
  }
  const mt::cuda::DeviceProperties p = mt::cuda::get_device_properties(0);
  fmt::print("device {} (compute capability {}.{})\n", p.name, p.major, p.minor);
  const std::string what = argc > 1 ? argv[1] : "all";
  if (what == "profile") {
    // cuda_bench profile [PRECISION...] (default: 32-true 16-mixed)
    // cuda_bench profile small [PRECISION...]: the reference GPT (6x256, context 128) instead
    const mt::models::GPTConfig gpt2{.context = 256, .layers = 12, .width = 768, .heads = 12};
    const mt::models::GPTConfig small{.context = 128, .layers = 6, .width = 256, .heads = 8};
    const bool use_small = argc > 2 && std::string(argv[2]) == "small";
    std::vector<std::string> precisions(argv + (use_small ? 3 : 2), argv + argc);
    if (precisions.empty()) precisions = {"32-true", "16-mixed"};
    for (const std::string& precision : precisions)
      profile_gpt(precision, use_small ? small : gpt2, 16);
    return 0;
  }
  if (what == "attncheck") {
    // cuda_bench attncheck [PRECISION...] (default: bf16-mixed transformer-engine)
    std::vector<std::string> precisions(argv + 2, argv + argc);
    if (precisions.empty()) precisions = {"bf16-mixed", "transformer-engine"};
    for (const std::string& precision : precisions) {
      const size_t colon = precision.find(':');  // transformer-engine:h0.attn.out_proj,...
      if (colon == std::string::npos)
        attention_check(precision, 10);
      else
        attention_check(precision.substr(0, colon), 10, precision.substr(colon + 1));
    }
    return 0;
  }
  if (what == "fp8") {
    bench_fp8_pieces();
    return 0;
  }
  if (what == "all" || what == "gemm") {
    mt::set_float32_matmul_precision("highest");
    bench_gemm("bf16", mt::kBFloat16, 4096, 50);
    bench_gemm("fp16", mt::kFloat16, 4096, 50);
    bench_gemm("fp32", mt::kFloat32, 4096, 10);
    if (mt::cuda::is_fp8_supported()) bench_gemm_fp8(4096, 50);
    mt::set_float32_matmul_precision("high");
    bench_gemm("tf32", mt::kFloat32, 4096, 20);
    mt::set_float32_matmul_precision("highest");
  }
  if (what == "all" || what == "attn") {
    bench_attention("bf16", mt::kBFloat16);
    bench_attention("fp16", mt::kFloat16);
    bench_attention("fp32", mt::kFloat32);
  }
  if (what == "all" || what == "mlp") {
    for (const char* precision : {"32-true", "16-mixed", "bf16-mixed"})
      bench_mlp(precision, 512, 10, 100);
  }
  if (what == "all" || what == "graphs") {
    // The reference GPT with its forward and backward replayed as a CUDA graph, beside the same
    // steps launched eagerly (each precision eager then graphed, one after the other).
    const mt::models::GPTConfig small{.context = 128, .layers = 6, .width = 256, .heads = 8};
    const mt::models::GPTConfig gpt2{.context = 256, .layers = 12, .width = 768, .heads = 12};
    // cuda_bench graphs small: the reference GPT only
    const bool only_small = argc > 2 && std::string(argv[2]) == "small";
    for (const auto& [cfg, batch] : {std::pair{small, int64_t{16}}, std::pair{gpt2, int64_t{16}}}) {
      if (only_small && cfg.layers != small.layers) continue;
      double ms[2][3] = {};
      const char* precisions[3] = {"32-true", "16-mixed", "bf16-mixed"};
      for (int k = 0; k < 3; ++k)
        for (int g = 0; g < 2; ++g) ms[g][k] = bench_gpt(precisions[k], cfg, batch, 5, 50, g == 1);
      for (int k = 0; k < 3; ++k)
        fmt::print("speedup gpt{} {} graphs/eager {:.2f}x\n", cfg.layers, precisions[k],
                   ms[0][k] / ms[1][k]);
      fmt::print("speedup gpt{} 16-mixed/32-true with graphs {:.2f}x (eager {:.2f}x)\n", cfg.layers,
                 ms[1][0] / ms[1][1], ms[0][0] / ms[0][1]);
      fmt::print("speedup gpt{} bf16-mixed/32-true with graphs {:.2f}x (eager {:.2f}x)\n",
                 cfg.layers, ms[1][0] / ms[1][2], ms[0][0] / ms[0][2]);
    }
  }
  if (what == "all" || what == "gpt") {
    // The reference GPT (6x256, context 128, batch 16: `mantissa train --model gpt`) and a
    // GPT-2-small-sized one (12x768, context 256), where the products dominate.
    const mt::models::GPTConfig small{.context = 128, .layers = 6, .width = 256, .heads = 8};
    const mt::models::GPTConfig gpt2{.context = 256, .layers = 12, .width = 768, .heads = 12};
    for (const auto& [cfg, batch] : {std::pair{small, int64_t{16}}, std::pair{gpt2, int64_t{16}}}) {
      const double fp32 = bench_gpt("32-true", cfg, batch, 5, 30);
      const double fp16 = bench_gpt("16-mixed", cfg, batch, 5, 30);
      const double bf16 = bench_gpt("bf16-mixed", cfg, batch, 5, 30);
      if (mt::cuda::is_fp8_supported()) {
        const double fp8 = bench_gpt("transformer-engine", cfg, batch, 5, 30);
        fmt::print("speedup gpt{} transformer-engine/bf16-mixed {:.2f}x\n", cfg.layers, bf16 / fp8);
      }
      fmt::print("speedup gpt{} 16-mixed/32-true {:.2f}x\n", cfg.layers, fp32 / fp16);
    }
  }
  return 0;
}
