#pragma once
// ModelCheckpoint: saves checkpoints at the end of training epochs (after validation and the
// module's on_train_epoch_end) and after every validation inside an epoch (val_check_interval,
// as Lightning's), keeping the best save_top_k by a monitored metric, or the latest ones
// without a monitor, plus "last.safetensors" with save_last and when a signal interrupts the
// run. It saves at most once per global step. The checkpoint the run resumed from
// (Trainer::ckpt_path()) is not removed when it falls out of the top k, as in Lightning: it
// leaves the kept set and stays on the disk, untracked, and with enable_version_counter no
// checkpoint takes its name (docs/checkpoints.md).
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "mantissa/train/callback.h"
#include "mantissa/train/rank_agreed_error.h"

namespace mantissa::train {

// ModelCheckpointOptions::filename's default, and what an empty filename stands for.
inline constexpr const char* kDefaultCheckpointFilename = "{epoch}-{step}";

struct ModelCheckpointOptions {
  std::string dirpath = "checkpoints";
  // "{epoch}", "{step}" and "{<metric>}" become "epoch=1", "step=200", "val_loss=0.4321"
  // (Lightning's auto-insert of the name); "{epoch:02d}", "{val_loss:.2f}" format with the spec;
  // ".safetensors" is appended. Unpaired braces and bad specs throw in the constructor, a key
  // that is neither epoch, step nor logged at the first save (Lightning writes "key=0").
  // Empty: the default "{epoch}-{step}", as Lightning does for filename=None (or "").
  std::string filename = kDefaultCheckpointFilename;
  std::optional<std::string> monitor;  // a logged metric; none: the latest checkpoints
  std::string mode = "min";            // "min" or "max"
  int64_t save_top_k = 1;              // -1: all, 0: none
  bool save_last = false;
  int64_t every_n_epochs = 1;
  // > 0: save after every n-th optimizer step instead of at epoch ends (Lightning's
  // every_n_train_steps; every_n_epochs is then ignored). The checkpoint records the position
  // in the epoch, so a resume continues with the next batch.
  int64_t every_n_train_steps = 0;
  // When the formatted name is taken by a file that is not the one this checkpoint replaces in
  // the kept set (a template without {step} saved twice in an epoch, an earlier run's file),
  // append "-v1", "-v2", ... (Lightning's enable_version_counter); false: write over it.
  // last.safetensors keeps its name (--resume last reads it).
  bool enable_version_counter = true;
};

// What `--resume` / fit's ckpt_path may name: "last" (<dirpath>/last.safetensors), "best" (the
// best checkpoint recorded by the ModelCheckpoint whose state is in last.safetensors; needs a
// monitor), or a file path, returned as it is. Throws with what to do when the file is missing.
std::string resolve_checkpoint_path(const std::string& spec, const std::string& dirpath);

// Thrown when ModelCheckpoint cannot write a checkpoint into its directory during a run (the
// directory was removed, replaced by a file, made read-only, or its disk is full): names the
// file and the directory, so the caller (`mantissa train`) can say which flag gave it and still
// report what the run measured before it stopped. Under ddp rank 0 writes for every rank, and
// the ranks agree on the failure before any throws it, so all of them stop together (every_rank).
class CheckpointSaveFailed : public RankAgreedError {
 public:
  CheckpointSaveFailed(const std::string& message, std::string path, std::string dirpath,
                       std::string reason, bool every_rank)
      : RankAgreedError(message, every_rank),
        path_(std::move(path)),
        dirpath_(std::move(dirpath)),
        reason_(std::move(reason)) {}
  const std::string& path() const { return path_; }
  const std::string& dirpath() const { return dirpath_; }
  const std::string& reason() const { return reason_; }  // the writer's error

 private:
  std::string path_, dirpath_, reason_;
};

class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options = {});

  std::string state_key() const override;
  bool is_monitoring() const override { return true; }
  // Creates dirpath and checks that it is writable before the first step, and removes
  // temporary files an interrupted save left there (io/stale_temporaries.h).
  void on_fit_start(Trainer& trainer, TrainModule& module) override;
  void on_train_epoch_end(Trainer& trainer, TrainModule& module) override;
  // After a validation inside an epoch (Trainer::validating_mid_epoch): a top-k checkpoint
  // ranked by that validation (unless every_n_train_steps, whose checkpoints are the step
  // ones, or every_n_epochs leaves the epoch out), and last.safetensors with save_last.
  void on_validation_end(Trainer& trainer, TrainModule& module) override;
  void on_train_batch_end(Trainer& trainer, TrainModule& module, const Tensor& loss,
                          const data::Example& batch, int64_t batch_idx) override;
  // A signal stopped the run: writes <dirpath>/last.safetensors (also without save_last), the
  // file to resume from.
  void on_train_interrupted(Trainer& trainer, TrainModule& module) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  const std::string& best_model_path() const { return best_model_path_; }
  std::optional<double> best_model_score() const { return best_model_score_; }
  const std::string& last_model_path() const { return last_model_path_; }
  // Saved files kept (path -> monitored score; the global step without a monitor).
  const std::map<std::string, double>& best_k_models() const { return best_k_models_; }
  const ModelCheckpointOptions& options() const { return options_; }

 private:
  // dirpath/<formatted filename>.safetensors, versioned (-v1, -v2, ...) while that name is
  // taken, unless by `replaced`, the kept file this checkpoint pushes out of the top k.
  std::string format_name(Trainer& trainer, const std::string& replaced) const;
  // Whether a file is at `path`: rank 0's answer on every rank (it alone writes), so the ranks
  // agree on the name.
  bool file_exists(Trainer& trainer, const std::string& path) const;
  // top_k false: only last.safetensors (with save_last).
  void save(Trainer& trainer, bool top_k = true);
  // trainer.save_checkpoint(path), after creating dirpath again; a failure throws
  // CheckpointSaveFailed naming the file and the directory.
  void write(Trainer& trainer, const std::string& path);
  // A checkpoint ranked among the top k (or the newest without a monitor), when it makes it.
  void save_top_k(Trainer& trainer);
  bool better(double a, double b) const;

  ModelCheckpointOptions options_;
  std::map<std::string, double> best_k_models_;
  std::string best_model_path_;
  std::optional<double> best_model_score_;
  std::string last_model_path_;
  int64_t last_step_seen_ = -1;
  int64_t last_step_saved_ = -1;  // the global step of the last save (one save per step)
};

}  // namespace mantissa::train
