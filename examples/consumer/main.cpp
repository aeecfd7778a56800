// Uses an installed mantissa: the reference MLP from the models headers trained for a few
// AdamW8bit steps on random data; prints the loss before and after (exit 1 if it did not fall)
// and the size of a small reference GPT. The models' headers are <mantissa/models/...>, so a
// project's own mlp.h or gpt.h does not collide with them.
#include <mantissa/mantissa.h>
#include <mantissa/models/gpt.h>
#include <mantissa/models/mlp.h>

#include <cstdio>

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
  models::GPT gpt({.context = 16, .layers = 1, .width = 32, .heads = 2});
  int64_t gpt_parameters = 0;
  for (const Tensor& p : gpt.parameters()) gpt_parameters += p.numel();
  std::printf(
      "mantissa %s consumer: loss %.4f -> %.4f, optimizer state %lld bytes, GPT %lld parameters\n",
      version(), first, last, static_cast<long long>(opt.state_bytes()),
      static_cast<long long>(gpt_parameters));
  return last < first ? 0 : 1;
}
