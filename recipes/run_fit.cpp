// The training spine every training run shares (see run_fit.h).
#include "mantissa/recipes/run_fit.h"

#include "mantissa/recipes/diverged_result.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/precisions/apex_amp_precision.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

namespace mantissa::recipes {

FitOutcome run_fit(train::Trainer& trainer, train::TrainModule& module,
                   data::DataLoader& train_loader, const FitRequest& request, TrainMetrics& m) {
  FitOutcome fit;
  try {
    trainer.fit(module, train_loader, request.val_loader, request.resume);
  } catch (const train::TrainingDiverged& e) {
    // A range test climbs until the loss diverges: that ends its sweep (the finder recorded it).
    if (!request.lr_find) {
      record_stopped_by_divergence(e, trainer, m);
      fit.stopped_by_divergence = std::current_exception();
    }
  } catch (const train::CheckpointSaveFailed& e) {
    fit.save_failed = checkpoint_dir_error(e, trainer, m);
  }
  m.epochs_trained = trainer.epochs_trained();
  // A resumed run already at --max-steps (or its --epochs), --max-steps 0, a
  // --limit-train-batches that leaves no batch: said, so that the summary does not read as a
  // run that trained. An interrupted run's reason is its interruption.
  if (!fit.stopped() && !request.lr_find && !trainer.interrupted() &&
      request.fit_start != nullptr && trainer.global_step() == request.fit_start->step) {
    m.nothing_trained_reason =
        nothing_trained_reason(request.limits, trainer, request.batches_per_epoch);
  }
  return fit;
}

FinalWeightsEvaluation evaluate_final_weights(train::Trainer& trainer, train::TrainModule& module,
                                              data::DataLoader& loader,
                                              bool validated_at_last_step) {
  FinalWeightsEvaluation out;
  out.source = final_evaluation(trainer, loader, validated_at_last_step);
  switch (out.source) {
    case FinalEvaluation::kNone:  // --limit-test-batches 0
    case FinalEvaluation::kLastValidation:
      break;
    case FinalEvaluation::kValidate:
      trainer.validate(module, loader);
      out.source = FinalEvaluation::kLastValidation;
      break;
    case FinalEvaluation::kTest:
      out.test_results = trainer.test(module, loader);
      break;
  }
  return out;
}

void record_weight_bytes(train::Trainer& trainer, const nn::Module& net, TrainMetrics& m) {
  const auto* apex = dynamic_cast<const train::ApexAmpPrecision*>(&trainer.precision_plugin());
  // Quantized weights are frozen buffers, not parameters: their stored bytes count too.
  m.weight_bytes += train::BitsandbytesPrecision::quantized_stats(net).stored_bytes;
  for (const auto& p : net.parameters()) {
    m.weight_bytes += p.numel() * p.dtype().itemsize();
    if (apex && apex->master_of(p).defined()) m.weight_bytes += p.numel() * 4;
    if (p.grad().defined()) m.gradient_bytes += p.grad().numel() * p.grad().dtype().itemsize();
  }
}

void record_fit_end(train::Trainer& trainer, const nn::Module& net, const std::string& optimizer,
                    const FinalLoss& final_loss, TrainMetrics& m) {
  m.optimizer = optimizer;
  m.optimizer_state_bytes = trainer.strategy().optimizer_state_bytes(*trainer.optimizer());
  if (const auto ls = trainer.precision_plugin().loss_scale_state()) {
    m.skipped_steps = ls->skipped_steps;
    m.final_loss_scale = ls->scale;
  }
  m.step_losses = trainer.step_losses();
  m.fp8 = fp8_metrics(trainer);
  m.fp8_recipe = fp8_recipe_metrics(trainer.precision_plugin());
  record_weight_bytes(trainer, net, m);
  if (trainer.interrupted()) record_interruption(trainer, m);
  // Recorded before the metrics JSON is written, which says so; the caller decides what it
  // means (train: exit status 4, compare: the precision's row).
  if (final_loss.loss && !trainer.interrupted())
    m.diverged = diverged_result_message(final_loss.evaluation, *final_loss.loss, trainer);
  record_world_size(m, trainer.strategy());
}

TrainMetrics finish_fit(const train::Trainer& trainer, const FitOutcome& fit, const TrainMetrics& m,
                        const std::string& metrics_json) {
  if (!metrics_json.empty() && trainer.strategy().is_global_zero()) {
    write_metrics_json(m, metrics_json);  // rank 0 writes for the job
  }
  if (fit.stopped_by_divergence) std::rethrow_exception(fit.stopped_by_divergence);
  if (fit.save_failed) throw *fit.save_failed;
  if (trainer.interrupted()) throw_interrupted(m, *trainer.interrupt_signal());
  return m;
}

}  // namespace mantissa::recipes
