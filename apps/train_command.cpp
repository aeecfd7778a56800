#include "train_command.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <sstream>

#include "mantissa/mantissa.h"
#include "metrics.h"
#include "mlp.h"
#include "precision.h"

namespace mantissa::app {
namespace {

struct TrainOptions {
  std::string model = "mlp";
  std::string precision = "32-true";
  int epochs = 2;
  int64_t batch_size = 256;
  double lr = 1e-3;
  double weight_decay = 1e-2;  // AdamW's default
  uint64_t seed = 0;
  std::string hidden = "256";
  int threads = 0;  // 0: OpenMP's default
  std::string metrics_json;
  std::string data_dir;
};

std::vector<int64_t> parse_hidden(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      MANTISSA_CHECK(used == item.size() && v > 0, "train", "bad --hidden entry '{}'", item);
      out.push_back(v);
    } catch (const std::logic_error&) {
      fail("train", "--hidden expects positive integers separated by commas, got '{}'", s);
    }
  }
  MANTISSA_CHECK(!out.empty(), "train", "--hidden needs at least one size");
  return out;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Test-set loss and accuracy without recording a graph, in batches of 1000.
EvalResult evaluate(nn::Module& model, const Tensor& images, const Tensor& labels, DType dtype) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = images.size(0);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - start);
    Tensor x = images.narrow(0, start, len).to(dtype);
    Tensor y = labels.narrow(0, start, len);
    Tensor logits = model.forward(x);
    loss_sum += cross_entropy(logits, y, {.reduction = Reduction::kSum}).item();
    correct += static_cast<int64_t>(sum(eq(argmax(logits, 1), y)).item());
  }
  model.train();
  return {loss_sum / static_cast<double>(n), static_cast<double>(correct) / static_cast<double>(n)};
}

void run_train(const TrainOptions& o) {
  const PrecisionChoice precision = parse_precision(o.precision);
  MANTISSA_CHECK(o.model == "mlp", "train", "unknown model '{}'; valid values are: mlp", o.model);
  MANTISSA_CHECK(o.epochs >= 1, "train", "--epochs must be at least 1, got {}", o.epochs);
  MANTISSA_CHECK(o.batch_size >= 1, "train", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, "train", "--lr must be positive, got {}", o.lr);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const std::vector<int64_t> hidden = parse_hidden(o.hidden);

  auto train_set = std::make_shared<data::FashionMNIST>(o.data_dir, /*train=*/true);
  data::FashionMNIST test_set(o.data_dir, /*train=*/false);
  const Tensor test_images = test_set.inputs();
  const Tensor test_labels = test_set.targets();

  manual_seed(o.seed);
  const int64_t baseline_bytes = memory_allocated();  // the data sets, held for the whole run
  reset_peak_memory_stats();
  auto model = models::make_mlp(784, hidden, 10);
  model->to(precision.param_dtype);
  optim::AdamW optimizer(model->parameters(), o.lr, {0.9, 0.999}, 1e-8, o.weight_decay);
  data::DataLoader loader(train_set, o.batch_size, /*shuffle=*/true, o.seed, /*drop_last=*/false);

  TrainMetrics m;
  m.precision = precision.canonical;
  m.model = o.model;
  m.epochs = o.epochs;
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  for (const auto& p : model->parameters()) m.parameters += p.numel();
  fmt::print("mantissa train: model {} 784-{}-10 ({} parameters), precision {}, {} threads\n",
             o.model, o.hidden, m.parameters, precision.canonical, m.threads);

  const auto run_start = Clock::now();
  double train_seconds = 0;
  int64_t samples_seen = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    loader.set_epoch(epoch);
    const auto epoch_start = Clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, step = 0;
    for (const data::Example& batch : loader) {
      Tensor x = batch.input.to(precision.param_dtype);
      Tensor logits = model->forward(x);
      Tensor loss = cross_entropy(logits, batch.target);
      const double loss_value = loss.item();
      if (!std::isfinite(loss_value)) {
        fail("train",
             "the loss became {} at epoch {} step {}; lower --lr (now {}) or use a wider "
             "precision",
             loss_value, epoch + 1, step, o.lr);
      }
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      const int64_t bs = batch.target.numel();
      loss_sum += loss_value * static_cast<double>(bs);
      {
        NoGradGuard no_grad;
        correct += static_cast<int64_t>(sum(eq(argmax(logits, 1), batch.target)).item());
      }
      seen += bs;
      ++step;
    }
    const double secs = seconds_since(epoch_start);
    train_seconds += secs;
    samples_seen += seen;
    const EvalResult test = evaluate(*model, test_images, test_labels, precision.param_dtype);
    m.train_loss.push_back(loss_sum / static_cast<double>(seen));
    m.train_accuracy.push_back(static_cast<double>(correct) / static_cast<double>(seen));
    m.test_loss.push_back(test.loss);
    m.test_accuracy.push_back(test.accuracy);
    m.epoch_seconds.push_back(secs);
    m.epoch_samples_per_second.push_back(static_cast<double>(seen) / secs);
    fmt::print(
        "epoch {}/{}  loss {:.4f}  train acc {:.4f}  {:.0f} samples/s  test loss {:.4f}  "
        "test acc {:.4f}\n",
        epoch + 1, o.epochs, m.train_loss.back(), m.train_accuracy.back(),
        m.epoch_samples_per_second.back(), test.loss, test.accuracy);
    std::fflush(stdout);
  }
  m.samples_per_second = static_cast<double>(samples_seen) / train_seconds;
  m.peak_memory_bytes = max_memory_allocated();
  m.peak_training_memory_bytes = max_memory_allocated() - baseline_bytes;
  m.total_seconds = seconds_since(run_start);
  fmt::print(
      "final test accuracy: {:.4f}  ({:.0f} samples/s, peak memory {:.1f} MiB, of which "
      "{:.1f} MiB for training beyond the data set)\n",
      m.test_accuracy.back(), m.samples_per_second,
      static_cast<double>(m.peak_memory_bytes) / (1 << 20),
      static_cast<double>(m.peak_training_memory_bytes) / (1 << 20));
  if (!o.metrics_json.empty()) {
    write_metrics_json(m, o.metrics_json);
    fmt::print("metrics written to {}\n", o.metrics_json);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a reference model on Fashion-MNIST");
  cmd->add_option("--model", opts->model, "Model: mlp")->capture_default_str();
  cmd->add_option("--precision", opts->precision, "32-true or 64-true")->capture_default_str();
  cmd->add_option("--epochs", opts->epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Samples per step")->capture_default_str();
  cmd->add_option("--lr", opts->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", opts->weight_decay, "AdamW weight decay")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation and shuffling")
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated (e.g. 1024,1024)")
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write metrics to this JSON file");
  cmd->add_option("--data-dir", opts->data_dir,
                  "Fashion-MNIST directory (default: $MANTISSA_DATA_DIR, then "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->callback([opts] { run_train(*opts); });
}

}  // namespace mantissa::app
