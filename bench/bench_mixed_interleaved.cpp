// What the mixed precisions cost over 32-true on one reference model, measured step by step:
// one model and one AdamW, and every step of the loop runs each precision in turn (autocast
// bf16, autocast f16 with a GradScaler, or neither), so that a VM whose speed drifts by 20-30 %
// within minutes (the Zen 3 of docs/performance.md, "A real Zen 3 again") slows all of them
// alike. Rounds of whole runs per binary or per precision (`mantissa bench --rounds`,
// bench/min_of_rounds.sh) compare minutes apart and read 5-10 % differences in either direction
// there. Prints each precision's fastest and median step and its median over 32-true's.
//
//   build/bench_mixed_interleaved MODEL [STEPS] [PRECISIONS]
//   build/bench_mixed_interleaved vit 30 32-true,bf16-mixed,16-mixed
//
// MODEL: mlp (784-1024-1024-10, batch 256), cnn (batch 128), vit (batch 256), gpt (6x256,
// context 128, batch 16), random data of the shapes `mantissa bench` uses. The true precisions
// (bf16-true, 16-true) need parameters of their own dtype, so another model: not here. The
// parameters are shared, so the precisions train one model together; this times steps, it
// does not compare losses (`mantissa compare` does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "mantissa/amp/autocast.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/cnn.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/mlp.h"
#include "mantissa/models/vit.h"
#include "mantissa/optim/grad_scaler.h"

namespace {

using namespace mantissa;

struct Workload {
  std::shared_ptr<nn::Module> model;
  Tensor x, y;
  bool sequence = false;  // GPT: logits (B, T, V) against targets (B, T)
};

Workload make_workload(const std::string& name) {
  manual_seed(0);
  Workload w;
  if (name == "mlp") {
    w.model = models::make_mlp(784, {1024, 1024}, 10);
    w.x = randn({256, 784});
    w.y = randint(0, 10, {256});
  } else if (name == "cnn") {
    w.model = models::make_cnn();
    w.x = randn({128, 784});
    w.y = randint(0, 10, {128});
  } else if (name == "vit") {
    w.model = std::make_shared<models::ViT>(models::ViTConfig{});
    w.x = randn({256, 784});
    w.y = randint(0, 10, {256});
  } else if (name == "gpt") {
    const models::GPTConfig c;
    w.model = std::make_shared<models::GPT>(c);
    w.x = randint(0, c.vocab, {16, c.context});
    w.y = randint(0, c.vocab, {16, c.context});
    w.sequence = true;
  } else {
    std::fprintf(stderr, "unknown model '%s': expected mlp, cnn, vit or gpt\n", name.c_str());
    std::exit(2);
  }
  return w;
}

std::vector<std::string> split_precisions(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string p; std::getline(ss, p, ',');) {
    if (p != "32-true" && p != "bf16-mixed" && p != "16-mixed") {
      std::fprintf(stderr, "unknown precision '%s': expected 32-true, bf16-mixed or 16-mixed\n",
                   p.c_str());
      std::exit(2);
    }
    out.push_back(p);
  }
  if (out.empty() || out.front() != "32-true") out.insert(out.begin(), "32-true");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s mlp|cnn|vit|gpt [STEPS] [PRECISIONS]\n", argv[0]);
    return 2;
  }
  const std::string model_name = argv[1];
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (steps < 1) {
    std::fprintf(stderr, "STEPS must be a positive number, got '%s'\n", argv[2]);
    return 2;
  }
  const std::vector<std::string> precisions =
      split_precisions(argc > 3 ? argv[3] : "32-true,bf16-mixed,16-mixed");
  Workload w = make_workload(model_name);
  optim::AdamW opt(w.model->parameters());
  amp::GradScaler scaler;
  constexpr int kWarmup = 2;
  std::vector<std::vector<double>> ms(precisions.size());
  for (int s = 0; s < kWarmup + steps; ++s) {
    for (size_t p = 0; p < precisions.size(); ++p) {
      const std::string& precision = precisions[p];
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss;
      {
        std::optional<amp::autocast> region;
        if (precision == "bf16-mixed") region.emplace(DeviceType::kCPU, kBFloat16);
        if (precision == "16-mixed") region.emplace(DeviceType::kCPU, kFloat16);
        Tensor logits = w.model->forward(w.x);
        loss = w.sequence ? cross_entropy(logits.reshape({-1, logits.size(-1)}), w.y.reshape({-1}))
                          : cross_entropy(logits, w.y);
      }
      opt.zero_grad();
      if (precision == "16-mixed") {
        scaler.scale(loss).backward();
        scaler.step(opt);
        scaler.update();
      } else {
        loss.backward();
        opt.step();
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (s >= kWarmup) ms[p].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::printf("%s, %d steps per precision after %d warm-up, precisions interleaved step by step\n",
              model_name.c_str(), steps, kWarmup);
  std::printf("%-12s %10s %10s %18s\n", "precision", "min ms", "median ms", "median / 32-true");
  double base = 0;
  for (size_t p = 0; p < precisions.size(); ++p) {
    std::vector<double> t = ms[p];
    std::sort(t.begin(), t.end());
    const double median = t[t.size() / 2];
    if (p == 0) base = median;
    std::printf("%-12s %10.2f %10.2f %18.3f\n", precisions[p].c_str(), t.front(), median,
                median / base);
  }
  return 0;
}
