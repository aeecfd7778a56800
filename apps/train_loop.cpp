#include "train_loop.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <sstream>

#include "cnn.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/amp/grad_scaler.h"
#include "mantissa/mantissa.h"
#include "mlp.h"
#include "precision.h"

namespace mantissa::app {
namespace {

std::vector<int64_t> parse_hidden(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    MANTISSA_CHECK(used == item.size() && used > 0 && v > 0, "train",
                   "--hidden expects positive integers separated by commas, got '{}'", s);
    out.push_back(v);
  }
  MANTISSA_CHECK(!out.empty(), "train", "--hidden needs at least one size");
  return out;
}

void validate(const TrainOptions& o) {
  MANTISSA_CHECK(o.model == "mlp" || o.model == "cnn", "train",
                 "unknown model '{}'; valid values are: mlp, cnn", o.model);
  MANTISSA_CHECK(o.epochs >= 1, "train", "--epochs must be at least 1, got {}", o.epochs);
  MANTISSA_CHECK(o.batch_size >= 1, "train", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, "train", "--lr must be positive, got {}", o.lr);
  MANTISSA_CHECK(o.train_subset >= 0, "train", "--train-subset must not be negative");
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The forward pass as the precision wants it: under autocast for "-mixed", plain otherwise.
Tensor forward(nn::Module& model, const Tensor& input, const PrecisionChoice& p) {
  if (!p.autocast_dtype) return model.forward(input.to(p.param_dtype));
  amp::autocast region(DeviceType::kCPU, *p.autocast_dtype);
  return model.forward(input);
}

int64_t count_correct(const Tensor& logits, const Tensor& target) {
  NoGradGuard no_grad;
  return static_cast<int64_t>(sum(eq(argmax(logits, 1), target)).item());
}

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Test-set loss and accuracy without recording a graph, in batches of 1000.
EvalResult evaluate(nn::Module& model, const Tensor& images, const Tensor& labels,
                    const PrecisionChoice& p) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = images.size(0);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - start);
    Tensor y = labels.narrow(0, start, len);
    Tensor logits = forward(model, images.narrow(0, start, len), p);
    loss_sum += cross_entropy(logits, y, {.reduction = Reduction::kSum}).item();
    correct += count_correct(logits, y);
  }
  model.train();
  return {loss_sum / static_cast<double>(n), static_cast<double>(correct) / static_cast<double>(n)};
}

struct LoadedData {
  Tensor train_inputs, train_targets, test_inputs, test_targets;
};

// Fashion-MNIST as the precision wants it. "16-true"/"bf16-true" feed the model half-precision
// inputs (Lightning's convert_input); converting the images once, up front, spares a float32
// batch and a cast per step, and the float32 originals are freed on return, so the data sets
// themselves take half the memory too.
LoadedData load_data(const TrainOptions& o, const PrecisionChoice& precision) {
  data::FashionMNIST train(o.data_dir, /*train=*/true);
  data::FashionMNIST test(o.data_dir, /*train=*/false);
  const int64_t n = o.train_subset > 0 ? std::min(o.train_subset, train.size()) : train.size();
  const DType input_dtype =
      precision.param_dtype.is_reduced_float() ? precision.param_dtype : kFloat32;
  return {train.inputs().narrow(0, 0, n).to(input_dtype), train.targets().narrow(0, 0, n),
          test.inputs().to(input_dtype), test.targets()};
}

}  // namespace

TrainMetrics run_training(const TrainOptions& o) {
  validate(o);
  const PrecisionChoice precision = parse_precision(o.precision);
  MANTISSA_CHECK(
      !(o.master_weights || o.stochastic_rounding) || precision.param_dtype.is_reduced_float(),
      "train",
      "--master-weights and --stochastic-rounding apply to 16-true and "
      "bf16-true only (precision is {})",
      precision.canonical);
  const std::vector<int64_t> hidden = parse_hidden(o.hidden);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  if (precision.param_dtype == kBFloat16 || precision.autocast_dtype == kBFloat16) {
    warn_once_if_bf16_emulated();
  }

  const LoadedData data = load_data(o, precision);
  auto train_set = std::make_shared<data::TensorDataset>(data.train_inputs, data.train_targets);

  manual_seed(o.seed);
  const int64_t baseline_bytes = memory_allocated();  // the data sets, held for the whole run
  reset_peak_memory_stats();
  std::shared_ptr<nn::Module> model;
  if (o.model == "cnn") {
    model = models::make_cnn(precision.param_dtype);
  } else {
    model = models::make_mlp(784, hidden, 10, precision.param_dtype);
  }
  optim::AdamOptions adam = optim::adamw_defaults();
  adam.lr = o.lr;
  adam.weight_decay = o.weight_decay;
  adam.master_weights = o.master_weights;
  adam.stochastic_rounding = o.stochastic_rounding;
  // Adam's second moment (squared gradients, ~1e-8 and below) underflows in float16, after
  // which eps = 1e-8 (0 in float16) divides the step into an overflow: keep the moments in
  // fp32 for 16-true. With stochastic rounding, fp32 moments are llm.c's recipe (a bf16
  // moment cannot decay by 0.999 per step: 0.999 * v rounds back to v).
  adam.fp32_state = precision.param_dtype == kFloat16 || o.stochastic_rounding;
  optim::AdamW optimizer(model->parameters(), adam);
  amp::GradScaler scaler(amp::GradScalerOptions{.enabled = precision.grad_scaler});
  data::DataLoader loader(train_set, o.batch_size, /*shuffle=*/true, o.seed);

  TrainMetrics m;
  m.precision = precision.canonical;
  m.model = o.model;
  m.epochs = o.epochs;
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  for (const auto& p : model->parameters()) m.parameters += p.numel();
  if (!o.quiet) {
    fmt::print("mantissa train: model {} 784-{}-10 ({} parameters), precision {}, {} threads\n",
               o.model, o.hidden, m.parameters, precision.canonical, m.threads);
  }

  const auto run_start = Clock::now();
  double train_seconds = 0;
  int64_t samples_seen = 0, global_step = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    loader.set_epoch(epoch);
    const auto epoch_start = Clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, finite_steps = 0;
    for (const data::Example& batch : loader) {
      Tensor logits = forward(*model, batch.input, precision);
      Tensor loss = cross_entropy(logits, batch.target);
      if (o.loss_multiplier) loss = mul(loss, o.loss_multiplier(global_step));
      const double loss_value = loss.item();
      if (!std::isfinite(loss_value) && !scaler.is_enabled()) {
        fail("train",
             "the loss became {} at epoch {} step {} in {}; lower --lr (now {}) or use a wider "
             "precision",
             loss_value, epoch + 1, global_step, precision.canonical, o.lr);
      }
      optimizer.zero_grad();
      scaler.scale(loss).backward();
      scaler.step(optimizer);  // skipped (and counted) when the scaled gradients overflowed
      scaler.update();
      const int64_t bs = batch.target.numel();
      if (std::isfinite(loss_value)) {
        loss_sum += loss_value * static_cast<double>(bs);
        finite_steps += bs;
      }
      correct += count_correct(logits, batch.target);
      seen += bs;
      ++global_step;
    }
    const double secs = seconds_since(epoch_start);
    train_seconds += secs;
    samples_seen += seen;
    const EvalResult test = evaluate(*model, data.test_inputs, data.test_targets, precision);
    m.train_loss.push_back(finite_steps ? loss_sum / static_cast<double>(finite_steps) : NAN);
    m.train_accuracy.push_back(static_cast<double>(correct) / static_cast<double>(seen));
    m.test_loss.push_back(test.loss);
    m.test_accuracy.push_back(test.accuracy);
    m.epoch_seconds.push_back(secs);
    m.epoch_samples_per_second.push_back(static_cast<double>(seen) / secs);
    if (!o.quiet) {
      fmt::print(
          "epoch {}/{}  loss {:.4f}  train acc {:.4f}  {:.0f} samples/s  test loss {:.4f}  "
          "test acc {:.4f}{}\n",
          epoch + 1, o.epochs, m.train_loss.back(), m.train_accuracy.back(),
          m.epoch_samples_per_second.back(), test.loss, test.accuracy,
          scaler.is_enabled() ? fmt::format("  loss scale {:g}  skipped steps {}",
                                            scaler.get_scale(), scaler.skipped_steps())
                              : "");
      std::fflush(stdout);
    }
  }
  m.samples_per_second = static_cast<double>(samples_seen) / train_seconds;
  m.peak_memory_bytes = max_memory_allocated();
  m.peak_training_memory_bytes = max_memory_allocated() - baseline_bytes;
  m.total_seconds = seconds_since(run_start);
  if (scaler.is_enabled()) {
    m.skipped_steps = scaler.skipped_steps();
    m.final_loss_scale = scaler.get_scale();
  }
  if (!o.metrics_json.empty()) write_metrics_json(m, o.metrics_json);
  return m;
}

}  // namespace mantissa::app
