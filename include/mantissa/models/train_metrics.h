#pragma once
// What a training run reports: printed per epoch and written as JSON by --metrics-json.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/train/strategy.h"

namespace mantissa::models {

struct TrainMetrics {
  std::string precision;
  // Data-parallel ranks. Every throughput (samples_per_second, epoch_samples_per_second,
  // tokens_per_second, and the lines printed during the run) is the whole job's, all ranks.
  int world_size = 1;
  // ddp only (docs/distributed.md): per optimizer step, the wall time with a gradient bucket
  // in flight, its share before backward ended, the time backward's end waited for the
  // reduction; and the bucket sizes in float32 bytes.
  double ddp_comm_seconds_per_step = 0;
  double ddp_overlapped_share = 0;
  double ddp_exposed_seconds_per_step = 0;
  std::vector<int64_t> ddp_bucket_bytes;
  // With several ranks: the strategy ("ddp", "zero1", "zero2"), each rank's
  // optimizer_state_bytes (optimizer_state_bytes itself is rank 0's; under zero1 and zero2 each
  // rank holds its part's) and each rank's peak resident set size at the end of the fit (the
  // process's high-water mark, getrusage's ru_maxrss: MPI's own memory and the data set
  // included).
  std::string strategy;
  std::vector<int64_t> optimizer_state_bytes_per_rank;
  std::vector<int64_t> peak_rss_bytes_per_rank;
  // "apex" and its level ("O0".."O3") when the run used Apex's levels ("" otherwise).
  std::string amp_backend, amp_level;
  // The transformer-engine precisions: the FP8 recipe the run used with its settings, as a
  // checkpoint records it (fp8::Recipe::to_json: "recipe" and the fields of its kind), and the
  // --fp8-exclude names ("exclude").
  std::optional<nlohmann::json> fp8_recipe;
  std::string model;
  // The GPT's blocks ran under activation checkpointing (--activation-checkpointing).
  bool activation_checkpointing = false;
  int epochs = 0;  // the run's epoch limit; -1: none (a GPT run limited by --max-steps alone)
  // Epochs of training data the run consumed, a resumed checkpoint's included, a cut-short last
  // epoch as its share of the epoch's batches (train::Trainer::epochs_trained).
  double epochs_trained = 0;
  int64_t batch_size = 0;
  int threads = 0;
  uint64_t seed = 0;
  // Parameter elements of the model, all of them: quantized weights counted by element, LoRA
  // adapters included (total_parameters where that is set); the metrics JSON's "parameters".
  int64_t parameters = 0;
  std::string optimizer;  // --optimizer
  // Optimizer state held at the end of the run (moments, 8-bit codes and absmax, master
  // weights); per parameter it is this over `parameters`.
  int64_t optimizer_state_bytes = 0;
  std::vector<double> train_loss;      // mean training loss of each epoch
  std::vector<double> train_accuracy;  // running accuracy on the training batches
  std::vector<double> test_accuracy;   // after each epoch
  std::vector<double> test_loss;
  // The test set evaluated on the weights the run ends with (unset: no evaluation ran, e.g.
  // --model gpt or compare's timed runs).
  std::optional<double> final_test_accuracy;
  std::optional<double> final_test_loss;
  // Why no optimizer step ran in this run ("" when steps ran), e.g. "--max-steps 0".
  std::string nothing_trained_reason;
  // `mantissa eval`: the file evaluated. Set, the metrics JSON names it and leaves out what
  // only a training run has (epochs, seed, optimizer and its state, training speed and losses).
  std::optional<std::string> evaluated_checkpoint;
  // Why the run's result is no result ("" for one that converged): `mantissa compare` records
  // why a precision's run stopped (its loss or weights stopped being finite), and such a row
  // reports nothing else; a run whose final evaluation is NaN or inf records it too
  // (recipes/diverged_result.h), with all its metrics, and its metrics JSON says "diverged".
  std::string diverged;
  // Set when the Trainer stopped the run in a step because its loss, a gradient or the weights
  // stopped being finite (train::TrainingDiverged): the optimizer steps completed before the
  // stop and the (1-based) epoch it stopped in, so the per-epoch lists hold the epochs before
  // it. Such a run has no final evaluation: the weights it ends with are not finite.
  std::optional<int64_t> diverged_after_step;
  std::optional<int64_t> diverged_in_epoch;
  // The run computed in bf16 on a CPU that emulates it through fp32 (slower than fp32).
  bool bf16_emulated = false;
  // compare: samples/s of each timed round after the warm-up steps; samples_per_second is
  // their median.
  std::vector<double> timed_samples_per_second;
  std::vector<double> epoch_seconds;  // training time of each epoch (no evaluation)
  std::vector<double> epoch_samples_per_second;
  double samples_per_second = 0;  // all training samples / all training time
  int64_t peak_memory_bytes = 0;  // counting allocator high-water mark during the run
  // A run on a GPU: the caching allocator's high-water marks there (cuda::max_memory_allocated
  // and max_memory_reserved of the run's GPU); unset on the CPU.
  std::optional<int64_t> peak_gpu_memory_bytes;
  std::optional<int64_t> peak_gpu_memory_reserved_bytes;
  // The high-water mark of the training steps (validation passes excluded), less the data
  // sets held throughout.
  int64_t peak_training_memory_bytes = 0;
  // At the end of the run: bytes of the parameters (and of Apex O2's fp32 masters, which the
  // precision plugin holds) and of their gradients (`mantissa plan`'s split of the peak).
  int64_t weight_bytes = 0;
  int64_t gradient_bytes = 0;
  double total_seconds = 0;
  // Loss scaling ("16-mixed", and Apex O2/O3 with a dynamic scale): optimizer steps skipped for
  // overflow, and the last scale.
  std::optional<int64_t> skipped_steps;
  std::optional<double> final_loss_scale;
  std::vector<double> step_losses;  // loss of every optimizer step, in order (NaN/inf kept)
  // Language models (--model gpt): optimizer steps, validation loss in nats per byte after the
  // last step (named "per char" in the key), training throughput, and the validation curve.
  std::optional<int64_t> steps;
  std::optional<double> val_loss_nats_per_char;
  std::optional<double> tokens_per_second;
  std::vector<int64_t> val_loss_steps;
  std::vector<double> val_loss_curve;
  std::optional<std::string> sample;
  // FP8 precisions: per layer, then role ("input", "weight", "grad_output"), the scale at the
  // end of the run and the fractions of values that saturated or flushed to zero over the
  // last logging interval (docs/fp8.md).
  std::optional<nlohmann::json> fp8;
  // Parameter elements that train (the metrics JSON's "trainable_parameters"; unset: all of
  // them), all of them (quantized weights counted by element), and the bits stored per quantized
  // weight element.
  std::optional<int64_t> trainable_parameters;
  std::optional<int64_t> total_parameters;
  std::optional<double> quantized_bits_per_parameter;
  // Set when a signal stopped the run early: "SIGINT" or "SIGTERM", the global step it
  // stopped after and the checkpoint to resume from ("" when checkpointing was off).
  std::optional<std::string> interrupted_by;
  std::optional<int64_t> interrupted_after_step;
  std::optional<std::string> resume_checkpoint;
  // The outputs a run stopped by a signal still wrote, holding the weights of step
  // interrupted_after_step (finetune: --output-dir's peft adapter or model directory, and
  // --merge-to's).
  std::vector<std::string> interrupted_weights_written_to;
  // Set when the signal came during the GPT's final sample (training had finished): the bytes
  // generated before it stopped (`sample` holds them).
  std::optional<int64_t> sample_interrupted_after_bytes;
  // Set when a checkpoint could not be written into --checkpoint-dir and the run stopped there:
  // the error (recipes::checkpoint_dir_error); the final evaluation is left out.
  std::optional<std::string> checkpoint_save_failed;
  // `mantissa train --lr-find`: the range test's settings, each step's lr, loss and smoothed
  // loss, the suggested lr and step, and why it stopped early ("" if it did not);
  // recipes/lr_find_run.cpp.
  std::optional<nlohmann::json> lr_find;
};

// The closing lines of `mantissa train`: final accuracy (or validation loss), throughput and
// memory. Safe for a run in which no step or evaluation ran.
std::string format_summary(const TrainMetrics& m);

// The GPU's peaks of a run on `device` (nothing on the CPU).
void record_gpu_memory(TrainMetrics& m, Device device);
// Records the world size and, under ddp, the strategy's name, the gradient reducer's statistics,
// each rank's optimizer_state_bytes (set m.optimizer_state_bytes first) and each rank's peak
// resident set size so far (a collective: every rank calls it). The throughputs are the job's
// already: the TrainModules count every rank's samples (the ranks step in lockstep on equal
// shards).
void record_world_size(TrainMetrics& m, train::Strategy& strategy);
// Writes the metrics as a JSON object, atomically (temporary file, then rename).
void write_metrics_json(const TrainMetrics& m, const std::string& path);

}  // namespace mantissa::models
