// Train a small MLP on Fashion-MNIST with bf16 autocast, or fp16 autocast and loss scaling.
// Built by scripts/build.sh; run: build/example_mixed_precision [fp16]
#include <fmt/format.h>

#include <cstring>

#include "mantissa/mantissa.h"

using namespace mantissa;

int main(int argc, char** argv) {
  const DType half = argc > 1 && std::strcmp(argv[1], "fp16") == 0 ? kFloat16 : kBFloat16;
  try {
    manual_seed(0);
    auto train = std::make_shared<data::FashionMNIST>("", /*train=*/true);
    data::FashionMNIST test("", /*train=*/false);

    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(784, 256));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(256, 10));
    optim::AdamW opt(model->parameters(), 1e-3);
    // fp16 needs loss scaling; with bf16 the scaler is disabled and passes everything through.
    amp::GradScaler scaler({.enabled = half == kFloat16});
    data::DataLoader loader(train, 256, /*shuffle=*/true, /*seed=*/0);

    for (int epoch = 0; epoch < 2; ++epoch) {
      loader.set_epoch(epoch);
      for (const data::Example& batch : loader) {
        Tensor loss;
        {
          amp::autocast region(DeviceType::kCPU, half);
          loss = cross_entropy(model->forward(batch.input), batch.target);
        }
        opt.zero_grad();
        scaler.scale(loss).backward();
        scaler.unscale_(opt);
        nn::utils::clip_grad_norm_(model->parameters(), 5.0);
        scaler.step(opt);
        scaler.update();
      }
      NoGradGuard no_grad;
      amp::autocast region(DeviceType::kCPU, half);
      Tensor logits = model->forward(test.inputs());
      const double acc = sum(eq(argmax(logits, 1), test.targets())).item() / test.size();
      fmt::print("epoch {}: test accuracy {:.4f} (scale {:g}, skipped steps {})\n", epoch + 1, acc,
                 scaler.get_scale(), scaler.skipped_steps());
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
