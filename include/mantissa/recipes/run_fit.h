#pragma once
// The training spine: what every training run of the recipes does around Trainer::fit, the
// same for the image models (image_run.h), the GPT (gpt_run.h) and a pretrained model's
// fine-tuning (finetune_run.h). A run builds its data, model and TrainModule, then:
//
//   FitOutcome fit = run_fit(trainer, module, train_loader, request, m);
//   FinalWeightsEvaluation e = evaluate_final_weights(...);  // unless fit.ended_early(trainer)
//   ... the run's own numbers (accuracy, curve, sample, output files) ...
//   record_fit_end(trainer, *net, o.optimizer, {"test", m.final_test_loss}, m);
//   return finish_fit(trainer, fit, m, o.metrics_json);
//
// run_fit records a stop (a non-finite loss, an unwritable --checkpoint-dir) instead of
// throwing it at once, so that the metrics JSON is still written; finish_fit writes it (rank 0)
// and then throws the stop or the interruption.
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "mantissa/data/dataloader.h"
#include "mantissa/nn/module.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

// What run_fit needs besides the Trainer, the module and the training data.
struct FitRequest {
  // Validated during the fit (null: no validation).
  data::DataLoader* val_loader = nullptr;
  std::string resume;  // checkpoint to continue from ("" for none)
  // A learning-rate range test (lr_find_run.h): a divergence ends its sweep (the finder has
  // recorded it) and is no stop; no "nothing trained" reason.
  bool lr_find = false;
  // The run's limits as given, and its training batches per epoch after --limit-train-batches:
  // what nothing_trained_reason says when no optimizer step ran.
  RunLimits limits;
  int64_t batches_per_epoch = 0;
  // Among the Trainer's callbacks: the step the fit started at.
  const FitStartStep* fit_start = nullptr;
};

// How a fit ended when it did not reach its end: stopped for divergence (the
// train::TrainingDiverged, rethrown by finish_fit) or because a checkpoint could not be written
// (the error said in --checkpoint-dir's words).
struct FitOutcome {
  std::exception_ptr stopped_by_divergence;
  std::optional<train::CheckpointSaveFailed> save_failed;
  bool stopped() const { return stopped_by_divergence || save_failed.has_value(); }
};

// Runs trainer.fit(module, train_loader, request.val_loader, request.resume). A divergence
// (outside a range test) is recorded in m.diverged with the step and epoch it stopped in, a
// failed checkpoint save in m.checkpoint_save_failed; either is returned, not thrown. A run that
// was neither stopped, interrupted nor a range test and ran no optimizer step gets
// m.nothing_trained_reason.
FitOutcome run_fit(train::Trainer& trainer, train::TrainModule& module,
                   data::DataLoader& train_loader, const FitRequest& request, TrainMetrics& m);

// Where the numbers of the final weights come from (final_evaluation): kNone, kLastValidation
// (the last validation's, also after the validation this ran for kValidate) or kTest (the test
// pass this ran; its results in `test_results`).
struct FinalWeightsEvaluation {
  FinalEvaluation source = FinalEvaluation::kNone;
  std::map<std::string, double> test_results;
};

// The final evaluation of a run that reached its end: nothing when the last validation saw the
// final weights over as many batches, a validation when it did not, a test pass when
// --limit-test-batches differs from --limit-val-batches, nothing for --limit-test-batches 0.
FinalWeightsEvaluation evaluate_final_weights(train::Trainer& trainer, train::TrainModule& module,
                                              data::DataLoader& loader,
                                              bool validated_at_last_step);

// Bytes of the model's weights (its parameters, the stored bytes of quantized weights, and
// Apex O2's fp32 masters) and of their gradients at the end of the run, added to
// m.weight_bytes and m.gradient_bytes.
void record_weight_bytes(train::Trainer& trainer, const nn::Module& net, TrainMetrics& m);

// The final evaluation a run reports ("test" for the image models, "validation" for the
// language models) and its loss; unset when there was none.
struct FinalLoss {
  const char* evaluation = "test";
  std::optional<double> loss;
};

// What every training run reports at its end, after its own numbers: the optimizer and its
// state bytes, the loss scaler's skipped steps and last scale, the step losses, the FP8 scaling
// statistics, the model's weight and gradient bytes, the interruption (signal, step, checkpoint
// to resume from), a final loss that is not finite as m.diverged (when not interrupted), and the
// world size.
void record_fit_end(train::Trainer& trainer, const nn::Module& net, const std::string& optimizer,
                    const FinalLoss& final_loss, TrainMetrics& m);

// Writes m to metrics_json (when set; rank 0 writes for the job), then throws what stopped the
// fit (the TrainingDiverged, the CheckpointSaveFailed) or the run's TrainingInterrupted; returns
// m when the run reached its end.
TrainMetrics finish_fit(const train::Trainer& trainer, const FitOutcome& fit, const TrainMetrics& m,
                        const std::string& metrics_json);

}  // namespace mantissa::recipes
