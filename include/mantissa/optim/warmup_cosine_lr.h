#pragma once
// WarmupCosineLR: the GPT schedule (nanoGPT, llm.c). The factor on each group's base lr rises
// linearly over warmup_steps, then follows a half cosine from 1 down to min_lr_ratio at
// total_steps and stays there:
//   step < warmup:  (step + 1) / warmup
//   otherwise:      min + (1 - min) (1 + cos(pi t)) / 2,  t = min(1, (step - warmup) / (total -
//   warmup))
// total_steps 0 keeps the factor at 1 after the warm-up. The three settings are saved in the
// state dict, so a checkpoint records the schedule it was trained with.
#include <cstdint>

#include "mantissa/optim/lr_scheduler.h"

namespace mantissa::optim {

class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                 double min_lr_ratio = 0.1);
  std::string name() const override { return "WarmupCosineLR"; }

  // The factor at step `step` (0-based optimizer steps).
  double factor(int64_t step) const;
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }
  double min_lr_ratio() const { return min_lr_ratio_; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  nlohmann::json hyper_json() const override;
  void load_hyper(const nlohmann::json& state) override;
  static void check_settings(int64_t warmup_steps, int64_t total_steps, double min_lr_ratio);

 private:
  int64_t warmup_steps_;
  int64_t total_steps_;
  double min_lr_ratio_;
};

}  // namespace mantissa::optim
