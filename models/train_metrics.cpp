#include "mantissa/models/train_metrics.h"

#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/precisions/fp8_stats_monitor.h"

namespace mantissa::models {

namespace {

// The process's resident set high-water mark (Linux reports ru_maxrss in KiB).
int64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}
// ", GPU peak 212.0 MiB" for a run on a GPU, else nothing.
std::string gpu_peak_text(const TrainMetrics& m) {
  if (!m.peak_gpu_memory_bytes) return "";
  return fmt::format(", GPU peak {:.1f} MiB",
                     static_cast<double>(*m.peak_gpu_memory_bytes) / (1 << 20));
}

// The results lines of format_summary.
std::string format_results(const TrainMetrics& m) {
  const double mib = static_cast<double>(m.peak_memory_bytes) / (1 << 20);
  const std::string gpu = gpu_peak_text(m);
  if (m.val_loss_nats_per_char) {
    // The byte-level GPT's loss is per byte; a tokenized model's (finetune) per token.
    const char* unit = m.model == "gpt" ? "nats/byte" : "nats/token";
    // No step in this run: no speed to show (a resumed run's history is the checkpoint's).
    if (!m.nothing_trained_reason.empty()) {
      return fmt::format(
          "nothing to train: {}\nvalidation loss of the final weights: {:.4f} {}  (peak "
          "memory {:.1f} MiB{})\n",
          m.nothing_trained_reason, *m.val_loss_nats_per_char, unit, mib, gpu);
    }
    return fmt::format(
        "final validation loss: {:.4f} {}  ({:.0f} tokens/s, peak memory {:.1f} MiB{})\n",
        *m.val_loss_nats_per_char, unit, m.tokens_per_second.value_or(0), mib, gpu);
  }
  std::string s;
  if (!m.nothing_trained_reason.empty())
    s += fmt::format("nothing to train: {}\n", m.nothing_trained_reason);
  if (!m.final_test_accuracy) return s + "no test evaluation ran\n";
  // Nothing trained in this run (a resumed run's step history is the checkpoint's).
  if (!m.nothing_trained_reason.empty() || m.step_losses.empty()) {
    return s +
           fmt::format("test accuracy of the final weights: {:.4f}  (peak memory {:.1f} MiB{})\n",
                       *m.final_test_accuracy, mib, gpu);
  }
  return s + fmt::format(
                 "final test accuracy: {:.4f}  ({:.0f} samples/s, peak memory {:.1f} MiB, of which "
                 "{:.1f} MiB for training beyond the data set{})\n",
                 *m.final_test_accuracy, m.samples_per_second, mib,
                 static_cast<double>(m.peak_training_memory_bytes) / (1 << 20), gpu);
}
}  // namespace

std::string format_summary(const TrainMetrics& m) {
  std::string s = format_results(m);
  // A transformer-engine run's last interval, in one line (train::fp8_summary_line).
  if (m.fp8) {
    const std::string fp8 = train::fp8_summary_line(*m.fp8);
    if (!fp8.empty()) s += fp8 + "\n";
  }
  return s;
}

void record_gpu_memory(TrainMetrics& m, Device device) {
  if (!device.is_cuda()) return;
  m.peak_gpu_memory_bytes = cuda::max_memory_allocated(device.index);
  m.peak_gpu_memory_reserved_bytes = cuda::max_memory_reserved(device.index);
}

void record_world_size(TrainMetrics& m, train::Strategy& strategy) {
  m.world_size = strategy.world_size();
  if (m.world_size <= 1) return;
  m.strategy = strategy.name();
  // Each rank's count in its own slot, summed: every rank gets the whole list.
  std::vector<double> bytes(static_cast<size_t>(m.world_size), 0.0);
  bytes[static_cast<size_t>(strategy.rank())] = static_cast<double>(m.optimizer_state_bytes);
  strategy.sum_over_ranks(bytes);
  m.optimizer_state_bytes_per_rank.assign(bytes.begin(), bytes.end());
  std::vector<double> rss(static_cast<size_t>(m.world_size), 0.0);
  rss[static_cast<size_t>(strategy.rank())] = static_cast<double>(peak_rss_bytes());
  strategy.sum_over_ranks(rss);
  m.peak_rss_bytes_per_rank.assign(rss.begin(), rss.end());
  if (const dist::DistributedDataParallel* r = strategy.reducer()) {
    const dist::DDPStats& s = r->stats();
    const double n = static_cast<double>(std::max<int64_t>(1, s.reductions));
    m.ddp_comm_seconds_per_step = s.comm_seconds / n;
    m.ddp_exposed_seconds_per_step = s.exposed_seconds / n;
    m.ddp_overlapped_share = s.comm_seconds > 0 ? s.overlapped_seconds / s.comm_seconds : 0;
    m.ddp_bucket_bytes = r->bucket_bytes();
  }
}

void write_metrics_json(const TrainMetrics& m, const std::string& path) {
  nlohmann::ordered_json j;
  j["precision"] = m.precision;
  if (!m.amp_backend.empty()) j["amp_backend"] = m.amp_backend;
  if (!m.amp_level.empty()) j["amp_level"] = m.amp_level;
  if (m.fp8_recipe) j["fp8_recipe"] = *m.fp8_recipe;
  j["world_size"] = m.world_size;
  if (m.world_size > 1) {
    j["ddp"] = {{"comm_seconds_per_step", m.ddp_comm_seconds_per_step},
                {"overlapped_share", m.ddp_overlapped_share},
                {"exposed_seconds_per_step", m.ddp_exposed_seconds_per_step},
                {"bucket_bytes", m.ddp_bucket_bytes}};
    j["strategy"] = m.strategy;
  }
  j["model"] = m.model;
  if (m.activation_checkpointing) j["activation_checkpointing"] = true;
  const bool trained = !m.evaluated_checkpoint;
  if (m.evaluated_checkpoint) j["evaluated_checkpoint"] = *m.evaluated_checkpoint;
  if (trained) {
    // What the run trained, as Hugging Face's trainer_state.json "epoch" (a fraction when the
    // last epoch was cut short), and its limit: null for a run limited by steps alone.
    j["epochs"] = m.epochs_trained;
    j["max_epochs"] = m.epochs >= 0 ? nlohmann::ordered_json(m.epochs) : nullptr;
  }
  j["batch_size"] = m.batch_size;
  j["threads"] = m.threads;
  if (trained) j["seed"] = m.seed;
  j["parameters"] = m.parameters;
  // Those the optimizer updates (all of them unless quantization or LoRA freezes some).
  if (trained) j["trainable_parameters"] = m.trainable_parameters.value_or(m.parameters);
  if (trained) {
    j["optimizer"] = m.optimizer;
    j["optimizer_state_bytes"] = m.optimizer_state_bytes;
    if (m.world_size > 1) j["optimizer_state_bytes_per_rank"] = m.optimizer_state_bytes_per_rank;
    if (m.world_size > 1) j["peak_rss_bytes_per_rank"] = m.peak_rss_bytes_per_rank;
    // Over the parameters the optimizer updates: frozen (quantized) weights hold no state.
    const int64_t updated = m.trainable_parameters.value_or(m.parameters);
    j["optimizer_state_bytes_per_parameter"] =
        updated > 0 ? static_cast<double>(m.optimizer_state_bytes) / static_cast<double>(updated)
                    : 0.0;
  }
  // null, not a made-up 0, when there is nothing to report.
  if (m.final_test_accuracy) {
    j["final_test_accuracy"] = *m.final_test_accuracy;
    j["final_test_loss"] = m.final_test_loss.value_or(NAN);
  } else {
    j["final_test_accuracy"] = nullptr;
    j["final_test_loss"] = nullptr;
  }
  if (trained) {
    j["final_train_loss"] = m.train_loss.empty() ? nlohmann::ordered_json(nullptr)
                                                 : nlohmann::ordered_json(m.train_loss.back());
  }
  if (!m.nothing_trained_reason.empty()) j["nothing_trained"] = m.nothing_trained_reason;
  // A script reading the file alone can tell a diverged run from a result.
  if (!m.diverged.empty()) j["diverged"] = m.diverged;
  if (m.diverged_after_step) j["diverged_after_step"] = *m.diverged_after_step;
  if (m.diverged_in_epoch) j["diverged_in_epoch"] = *m.diverged_in_epoch;
  // No optimizer step and no training time in this run: no speed to report (null, not 0).
  const bool no_speed = !m.nothing_trained_reason.empty() && m.samples_per_second == 0;
  if (trained) {
    j["samples_per_second"] =
        no_speed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(m.samples_per_second);
  }
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  if (m.peak_gpu_memory_bytes) j["peak_gpu_memory_bytes"] = *m.peak_gpu_memory_bytes;
  if (m.peak_gpu_memory_reserved_bytes)
    j["peak_gpu_memory_reserved_bytes"] = *m.peak_gpu_memory_reserved_bytes;
  if (trained) j["peak_training_memory_bytes"] = m.peak_training_memory_bytes;
  j["total_seconds"] = m.total_seconds;
  if (m.skipped_steps) j["skipped_steps"] = *m.skipped_steps;
  if (m.final_loss_scale) j["final_loss_scale"] = *m.final_loss_scale;
  if (m.steps) j["steps"] = *m.steps;
  if (m.val_loss_nats_per_char) {
    j["val_loss_nats_per_char"] = *m.val_loss_nats_per_char;
    // The key's name is the byte-level GPT's; a tokenized model's (finetune) losses are per token.
    j["val_loss_unit"] = m.model == "gpt" ? "nats/byte" : "nats/token";
  }
  if (m.tokens_per_second) {
    j["tokens_per_second"] = no_speed && *m.tokens_per_second == 0
                                 ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json(*m.tokens_per_second);
  }
  if (!m.val_loss_steps.empty()) j["val_loss_steps"] = m.val_loss_steps;
  if (!m.val_loss_curve.empty()) j["val_loss_curve"] = m.val_loss_curve;
  if (m.sample) j["sample"] = *m.sample;
  if (m.interrupted_by) {
    j["interrupted_by"] = *m.interrupted_by;
    j["interrupted_after_step"] = m.interrupted_after_step.value_or(0);
    j["resume_checkpoint"] = m.resume_checkpoint.value_or("");
    if (!m.interrupted_weights_written_to.empty())
      j["interrupted_weights_written_to"] = m.interrupted_weights_written_to;
    if (m.sample_interrupted_after_bytes)
      j["sample_interrupted_after_bytes"] = *m.sample_interrupted_after_bytes;
  }
  if (m.checkpoint_save_failed) j["checkpoint_save_failed"] = *m.checkpoint_save_failed;
  if (m.lr_find) j["lr_find"] = *m.lr_find;
  if (m.fp8) j["fp8"] = *m.fp8;
  if (m.quantized_bits_per_parameter)
    j["quantized_bits_per_parameter"] = *m.quantized_bits_per_parameter;
  if (trained) {
    j["train_loss"] = m.train_loss;
    j["train_accuracy"] = m.train_accuracy;
    j["test_accuracy"] = m.test_accuracy;
    j["test_loss"] = m.test_loss;
    j["epoch_seconds"] = m.epoch_seconds;
    j["epoch_samples_per_second"] = m.epoch_samples_per_second;
    j["step_losses"] = m.step_losses;
  }

  // replace: a sampled text (--model gpt) may hold invalid UTF-8.
  io::write_text_file_atomically(
      path, j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
      "metrics");
}

}  // namespace mantissa::models
