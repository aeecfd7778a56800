#pragma once
// The Trainer options every `mantissa train` model shares, from the command line's
// TrainOptions: the limits in their "0.25 or 10" form, checkpoints, loggers and the progress
// bar, early stopping and the other callbacks. Used by every model (image_run.cpp, gpt_run.cpp)
// and by finetune (finetune_run.cpp).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "mantissa/recipes/image_run.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

// "0.25" (has a '.', 'e' or 'E') is a fraction of an epoch, "10" a number of batches. Throws
// naming `flag` (tagged `where`, the command) for anything else, negative values and fractions
// above 1.
train::BatchLimit parse_batch_limit(const std::string& text, const char* flag,
                                    const char* where = "train");

// Fills precision (or the quantizing plugin), accelerator, seed, accumulate_grad_batches,
// gradient_clip_val/algorithm, limit_train_batches, val_check_interval, the ModelCheckpoint of
// --checkpoint-dir (one file per epoch and last.safetensors), the --logger and the progress
// bar (unless o.quiet or --no-progress-bar), log_every_n_steps, o.callbacks, EarlyStopping,
// the checkpoint monitor / top-k / every-n-steps, fast_dev_run, overfit_batches,
// check_val_every_n_epoch, num_sanity_val_steps, detect_anomaly, a LearningRateMonitor with a
// logger and the model summary (unless o.quiet), the line that confirms a --resume (where it
// goes on from; unless o.quiet), an Fp8StatsMonitor under the transformer-engine precisions. Throws
// for an unknown --logger and bad values, and for a --checkpoint-monitor or
// --early-stopping-monitor the run's module does not log while it trains (a fine-tune's and the
// GPT's: LanguageModel::fit_metric_names; the image models': ImageClassifier's), its errors
// tagged `command` ("train", "finetune").
train::TrainerOptions make_trainer_options(const TrainOptions& o, const char* command = "train");

// What the final evaluation of a `mantissa train` run (the image models' final test accuracy,
// the GPT's final validation loss) is, after fit: a test after fit (trainer.test() in Lightning),
// of
// --limit-test-batches' batches of the evaluation set (resolved as the Trainer resolves
// limit_test_batches, under ddp against the job's batches). `validated_at_last_step`: the run
// ended with a validation (at its last optimizer step).
enum class FinalEvaluation {
  kNone,            // --limit-test-batches 0: no final evaluation, no final numbers
  kLastValidation,  // a validation reads as many batches and the run ended with one: its numbers
  kValidate,        // a validation reads as many batches: one of the final weights
  kTest,            // another count: Trainer::test, of --limit-test-batches' batches
};
FinalEvaluation final_evaluation(train::Trainer& trainer, const data::DataLoader& loader,
                                 bool validated_at_last_step);

// Refuses, before the run trains, a --limit-train-batches (or --overfit-batches),
// --limit-val-batches or --limit-test-batches fraction that leaves no batch of its loader
// (Lightning's "You requested to check 0.01 of the val dataloader but 0.01 * 20 < 1"), naming
// the flag and the smallest fraction that works. The Trainer refuses them too, but in its
// field names and, for the final evaluation's --limit-test-batches, only after training.
// eval_loader: the data the validations and the final evaluation read (null: none).
void check_batch_limits(train::Trainer& trainer, const data::DataLoader& train_loader,
                        const data::DataLoader* eval_loader);

// `mantissa eval`'s batch limit. eval runs one evaluation, the one a train run's final numbers
// come from, so --limit-test-batches sets it; --limit-val-batches is taken too (a train command
// line's flags work), and both given must agree. Parsed as train parses them; 0 (nothing to
// evaluate) is refused. Not given: every batch. `flag` is the flag the limit came from ("" when
// none was given), for the errors.
struct EvalBatchLimit {
  train::BatchLimit limit;
  std::string flag;
};
EvalBatchLimit eval_batch_limit(const TrainOptions& o);
// Refuses, before the model is built, an eval limit whose fraction leaves no batch of `loader`
// (the batches counted as the Trainer counts them), naming the flag and the smallest fraction
// that works. `what`: "test" or "val", the data evaluated.
void check_eval_batch_limit(train::Trainer& trainer, const data::DataLoader& loader,
                            const EvalBatchLimit& limit, const char* what);

// The start banner's "N threads", or under ddp "R processes x N threads" (each rank's threads).
std::string workers_text(const train::Trainer& trainer, int threads);

// Whether the run's products compute in bf16: bf16 weights (bf16-true, transformer-engine's
// bf16 form), bf16-mixed's autocast, or a bitsandbytes mode's compute dtype (bf16 unless
// --quant-dtype says otherwise). Such a run warns once on a CPU that emulates bf16, and its
// metrics say bf16_emulated.
bool computes_in_bf16(train::Trainer& trainer);
// Training batches one rank reads per epoch: the loader's own count in one process, its shard's
// under ddp (about 1/N of it). What an epoch is in optimizer steps, so the cosine and onecycle
// schedules, the GPT's "batches per epoch" and the "nothing to train" check count these: counted
// from the whole loader, a run of N ranks scheduled N times its steps (the lr never decayed).
int64_t batches_per_rank(train::Trainer& trainer, const data::DataLoader& loader);

// The metrics JSON's "fp8" object: the last interval's FP8 statistics kept by the run's
// Fp8StatsMonitor, or nothing (no FP8 layers, or the monitor is absent).
std::optional<nlohmann::json> fp8_metrics(const train::Trainer& trainer);
// The metrics JSON's "fp8_recipe" (TrainMetrics::fp8_recipe) of a run under `precision`, or
// nothing outside the transformer-engine precisions.
std::optional<nlohmann::json> fp8_recipe_metrics(const train::Precision& precision);

// Counts from the step a fit starts at (a resumed run's step history begins with the
// checkpoint's, so an empty history does not mean "nothing trained"). Add it to the
// Trainer's callbacks; after fit, global_step() == step means no optimizer step ran.
class FitStartStep : public train::Callback {
 public:
  std::string state_key() const override { return "FitStartStep"; }
  void on_train_start(train::Trainer& trainer, train::TrainModule&) override {
    step = trainer.global_step();
  }
  int64_t step = 0;
};

// The limits a run trained under, for nothing_trained_reason: --max-steps and --epochs as the
// Trainer got them (-1: none), --limit-train-batches as given, --resume.
struct RunLimits {
  int64_t max_steps = -1;
  int64_t max_epochs = -1;
  std::string limit_train_batches;
  std::string resume;
};

// Why a run ran no optimizer step, in the user's terms ("the checkpoint 'ckpt/last.safetensors'
// is already at step 8 and --max-steps is 8"): the metrics' nothing_trained_reason, which the
// summary prints as "nothing to train: ..." and the metrics JSON keeps as "nothing_trained".
std::string nothing_trained_reason(const RunLimits& limits, const train::Trainer& trainer,
                                   int64_t batches_per_epoch);

// The error of an evaluation (`mantissa eval`) whose `what` ("test", "validation") loss is not
// finite: no result to report, said with the checkpoint, the loss and the likely causes.
std::string non_finite_eval_message(const std::string& checkpoint, const char* what, double loss,
                                    const std::string& precision);

// The data-parallel Trainer options from the --strategy, --devices, --sync-batchnorm and
// --ddp-* flags, as check_trainer_flags accepted them (make_trainer_options calls both).
void apply_distributed_options(const TrainOptions& o, train::TrainerOptions& t);
// Whether this process is a rank other than 0 of a data-parallel job started by mpirun (which
// neither draws, nor logs, nor checkpoints).
bool is_other_rank();

}  // namespace mantissa::recipes
