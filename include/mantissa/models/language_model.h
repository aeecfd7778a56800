#pragma once
// LanguageModel: the TrainModule that trains a causal language model with the Trainer: the
// byte-level GPT (gpt.h) on batches of data::TextWindowDataset (input bytes, next bytes), or a
// Hugging Face CausalLM (causal_lm.h) on data::TokenBlockDataset (tokens, next tokens with
// data::kIgnoreIndex where a token is not trained, as completion-only fine-tuning asks).
//   training_step   cross-entropy of the next token over the trained targets, logged as
//                   "train_loss" (the loggers; the progress bar shows the epoch's mean loss);
//                   a batch without a trained target has loss 0.
//                   With LanguageModelOptions::token_weighted, a step's loss is the mean over
//                   all the trained targets of its batches (every rank's, under
//                   TrainerOptions::average_items_across_ranks): loss_items counts them; a
//                   step without any has no loss (NaN in step_losses, no train_loss logged);
//   validation      the mean loss over all trained validation targets, logged as "val_loss"
//                   (nats per token; per byte for the GPT), "val_ppl" (its exp) and "val_bpb"
//                   (bits per token);
//   optimizer       AdamW by default, or what LanguageModelOptions::make_optimizer builds
//                   (the command line's --optimizer choice, 8-bit and LoRA cases included),
//                   with optim::WarmupCosineLR (linear warm-up, cosine decay to 10%)
//                   stepped every optimizer step.
//
// The module presents the network's own slots as its children (the GPT's wte, wpe, drop, h<i>,
// ln_f and an untied lm_head; a CausalLM's "model" and "lm_head"), so parameter names,
// checkpoint keys ("model.h0.attn.in_proj.weight"), the names --fp8-exclude and --quant-ignore
// match, and --save-weights files are all the network's. A precision plugin that replaces one
// of these slots at setup (an FP8 LayerNorm in "ln_f") is handed on to the network before the
// next forward.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/models/gpt.h"
#include "mantissa/train/train_module.h"

namespace mantissa::models {

struct LanguageModelOptions {
  double lr = 1e-3;  // peak learning rate (reached at the end of the warm-up)
  double weight_decay = 1e-2;
  // The schedule (optim/warmup_cosine_lr.h): lr rises linearly over warmup_steps optimizer
  // steps, then decays with a cosine to min_lr_ratio * lr at total_steps (0: no decay).
  int64_t warmup_steps = 100;
  int64_t total_steps = 0;
  double min_lr_ratio = 0.1;
  // Builds the optimizer over the model (its lr is the peak; the schedule scales it). Null:
  // AdamW(lr, weight_decay) over the parameters that require gradients.
  std::function<std::shared_ptr<optim::Optimizer>(nn::Module& model)> make_optimizer;
  // The loss of an optimizer step: true, the mean over every trained target of the step's
  // batches (the accumulated ones and, with TrainerOptions::average_items_across_ranks, every
  // rank's), as transformers' Trainer weights by num_items_in_batch: the step's gradient is one
  // process's over the whole batch, however many targets each batch trains. false: each
  // batch's own mean, averaged over the batches and the ranks (Lightning's, PyTorch DDP's). The
  // two agree when every batch trains as many targets (plain text, the byte-level GPT).
  bool token_weighted = false;
};

// One validation pass: the optimizer step it followed, the mean training loss of the batches
// since the previous pass (NaN when none) and the validation loss (nats per byte).
struct ValidationRecord {
  int64_t step = 0;
  double train_loss = 0;
  double val_loss = 0;
};

class LanguageModel : public train::TrainModule {
 public:
  LanguageModel(std::shared_ptr<GPT> gpt, LanguageModelOptions options = {});
  // Any network whose forward maps tokens (B, T) int64 to logits (B, T, vocab).
  LanguageModel(std::shared_ptr<nn::Module> net, LanguageModelOptions options);

  // The metrics it logs during fit (train_loss, val_loss, val_ppl, val_bpb; test_* only in a
  // test pass): what a ModelCheckpoint or EarlyStopping monitor may name.
  static const std::vector<std::string>& fit_metric_names();

  // tokens (B, T) -> logits (B, T, vocab).
  Tensor forward(const Tensor& tokens) override;
  Tensor training_step(const data::Example& batch, int64_t batch_idx) override;
  // training_step's two halves, for a fit with CUDA graphs (TrainerOptions::cuda_graphs).
  Tensor training_loss(const data::Example& batch) override;
  void on_training_loss(double loss) override;
  // With token_weighted: the batch's trained targets (TrainModule::loss_items).
  std::optional<int64_t> loss_items(const data::Example& batch) override;
  void validation_step(const data::Example& batch, int64_t batch_idx) override;
  void test_step(const data::Example& batch, int64_t batch_idx) override;
  train::OptimizerConfig configure_optimizers() override;
  void train(bool on = true) override;

  void on_train_epoch_start() override;
  void on_train_epoch_end() override;
  void on_train_batch_start(const data::Example& batch, int64_t batch_idx) override;
  void on_train_batch_end(const Tensor& loss, const data::Example& batch,
                          int64_t batch_idx) override;
  void on_validation_epoch_start() override;
  void on_validation_epoch_end() override;
  void on_test_epoch_start() override;
  void on_test_epoch_end() override;
  // The validation history, the training losses since the last validation, the closed epochs'
  // seconds and samples and the open epoch's so far travel with a checkpoint, so a resumed run
  // reports the whole run's curve and epochs (as ImageClassifier does). Under ddp the saved
  // interval sums are the whole job's (rank 0 takes them back on resume).
  void on_before_save_checkpoint() override;
  void on_save_checkpoint(nlohmann::json& state) const override;
  void on_load_checkpoint(const nlohmann::json& state) override;

  // The network; gpt() throws when it is not a GPT.
  GPT& gpt();
  nn::Module& net();
  const std::vector<ValidationRecord>& history() const { return history_; }
  // Time spent in training batches (forward, backward, optimizer; validation excluded), and
  // the tokens and sequences they held, over this module's lifetime. Under ddp the tokens and
  // sequences are the whole job's (every rank's batches), so tokens / seconds is the job's rate.
  double train_seconds() const { return train_seconds_; }
  int64_t train_tokens() const { return train_tokens_; }
  int64_t train_samples() const { return train_samples_; }
  // The training seconds and the job's samples/s of each epoch trained, one entry an epoch,
  // recorded at its end (an epoch that --max-steps cut short included, as its part). An epoch
  // still open (a run stopped by a signal or divergence inside it) is added by
  // close_open_epoch(). A resumed run's lists begin with the checkpoint's epochs, and the epoch
  // it resumed inside counts the seconds and samples trained before the checkpoint too.
  const std::vector<double>& epoch_seconds() const { return epoch_seconds_; }
  const std::vector<double>& epoch_samples_per_second() const { return epoch_samples_per_second_; }
  // Records the part of an epoch that did not reach its end (no-op when none trained).
  void close_open_epoch();

 private:
  void sync_slots();  // hands slots a plugin replaced on to the network

  std::shared_ptr<nn::Module> net_;
  LanguageModelOptions options_;
  std::vector<ValidationRecord> history_;
  double step_loss_ = 0;          // token_weighted: the shares of the step's batches so far
  double interval_loss_sum_ = 0;  // finite training losses since the last validation
  int64_t interval_loss_count_ = 0;
  std::array<double, 2> job_interval_sums_{};  // the two above over every rank, for a checkpoint
  // Adds the ranks' eval_loss_sum_ and eval_targets_ under ddp (each evaluated its shard).
  void sum_eval_over_ranks();
  double eval_loss_sum_ = 0;  // summed over the targets of one validation/test pass
  int64_t eval_targets_ = 0;
  double train_seconds_ = 0;
  int64_t train_tokens_ = 0, train_samples_ = 0;
  // train_seconds_ and train_samples_ when the open epoch began (-1: no epoch open).
  double epoch_start_seconds_ = -1;
  int64_t epoch_start_samples_ = 0;
  // What the open epoch trained before the checkpoint this run resumed inside it (0 otherwise).
  double epoch_carried_seconds_ = 0;
  int64_t epoch_carried_samples_ = 0;
  // Set by on_load_checkpoint: the epoch the checkpoint was saved in (-1: none) and what it had
  // trained of it, carried when that epoch starts (the Trainer may move past it instead: a
  // checkpoint written after the epoch's end).
  int64_t resumed_epoch_ = -1;
  double resumed_epoch_seconds_ = 0;
  int64_t resumed_epoch_samples_ = 0;
  // The checkpoint's last entry is that epoch's part (it was cut short): replaced when it starts.
  bool replaces_last_epoch_ = false;
  std::vector<double> epoch_seconds_, epoch_samples_per_second_;
  std::vector<int64_t> epoch_samples_;  // each entry's samples, exact (for the checkpoint)
  // The open epoch's seconds and samples so far, with the batch in progress when one is (a step
  // checkpoint is saved in the callbacks' on_train_batch_end, before this module's counts the
  // batch, which the checkpoint's counters include), as on_before_save_checkpoint took them.
  std::pair<double, int64_t> epoch_so_far_at_save_{0, 0};
  double batch_start_ = 0;
  int64_t batch_samples_ = 0;  // the job's samples of the batch in progress
  bool batch_open_ = false;    // between on_train_batch_start and on_train_batch_end
};

}  // namespace mantissa::models
