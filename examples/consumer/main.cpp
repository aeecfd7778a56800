// Uses an installed mantissa: the reference MLP from the models headers trained for a few
// AdamW8bit steps on random data; prints the loss before and after (exit 1 if it did not fall).
#include <cstdio>

#include "mantissa/mantissa.h"
#include "mlp.h"

int main() {
  using namespace mantissa;
  manual_seed(0);
  auto model = models::make_mlp(16, {64}, 4);
  optim::AdamW8bit opt(model->parameters(), [] {
    optim::Adam8bitOptions o = optim::adamw8bit_defaults();
    o.lr = 1e-2;
    o.min_8bit_size = 0;  // tiny model: quantize every parameter's state
    return o;
  }());
  const Tensor x = randn({32, 16});
  const Tensor y = argmax(x.narrow(1, 0, 4), 1);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    Tensor loss = cross_entropy(model->forward(x), y);
    (step == 0 ? first : last) = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  std::printf("mantissa %s consumer: loss %.4f -> %.4f, optimizer state %lld bytes\n", version(),
              first, last, static_cast<long long>(opt.state_bytes()));
  return last < first ? 0 : 1;
}
