#include "mantissa/recipes/memory_plan.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "mantissa/core/allocator.h"
#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/io/output_path.h"
#include "mantissa/recipes/byte_size.h"

namespace mantissa::recipes {
namespace {

// A text file of `bytes` pseudo-random lower-case words for the GPT's dry run, removed when
// the object goes.
class SyntheticText {
 public:
  explicit SyntheticText(int64_t bytes) {
    path_ = (std::filesystem::temp_directory_path() /
             fmt::format("mantissa_plan_{}_{}.txt", getpid(), counter_++))
                .string();
    std::string text(static_cast<size_t>(bytes), ' ');
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (char& c : text) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c = x % 6 == 0 ? ' ' : static_cast<char>('a' + x % 26);
    }
    // Checked to the end: an ofstream's destructor writes its last buffer unchecked, and a full
    // temporary directory would leave the dry run an empty text ("the corpus is too short").
    try {
      io::write_text_file_atomically(path_, text, "plan");
    } catch (const Error& e) {
      fail("plan",
           "the GPT's dry runs need a {}-byte text file in the temporary directory '{}', which "
           "could not be written ({}); free space there or point TMPDIR at another directory",
           bytes, std::filesystem::temp_directory_path().string(), e.what());
    }
  }
  ~SyntheticText() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

StepMemory from_metrics(const TrainMetrics& m, int64_t batch) {
  return {.batch = batch,
          .peak = m.peak_training_memory_bytes,
          .weights = m.weight_bytes,
          .gradients = m.gradient_bytes,
          .optimizer_state = m.optimizer_state_bytes};
}

}  // namespace

StepMemory measure_step_memory(const PlanModel& model, int64_t batch) {
  MANTISSA_CHECK(batch >= 1, "plan", "a dry run needs a batch of at least 1, got {}", batch);
  TrainOptions o = model.train;
  o.batch_size = batch;
  o.max_steps = 2;  // the second step runs with the optimizer state of the first
  o.quiet = true;
  o.progress_bar = false;
  o.metrics_json.clear();
  o.checkpoint_dir.clear();
  o.logger.clear();
  o.memory_limit.clear();
  o.callbacks.clear();
  if (o.model == "gpt") {
    GptOptions g = model.gpt;
    g.max_steps = 2;
    g.epochs.reset();
    g.eval_interval = 1000000;
    g.eval_batches = 1;
    g.sample_tokens = 0;
    g.save_weights.clear();
    // Enough windows for two training batches and one validation batch (10% of the text).
    const int64_t bytes = (3 * batch + 4) * (g.context + 1) * 11;
    const SyntheticText text(bytes);
    g.text = text.path();
    return from_metrics(run_gpt_training(o, g), batch);
  }
  o.synthetic_data = true;
  o.evaluate = false;
  o.train_subset = 2 * batch;  // two batches: two steps in one epoch
  o.epochs = 1;
  return from_metrics(run_training(o), batch);
}

namespace {

// plan_largest_batch's search; `measure` dry-runs a batch (and records it).
template <class Measure>
BatchPlan search_largest_batch(const PlanModel& model, int64_t budget, int64_t max_batch,
                               int64_t verify_up_to, const Measure& measure) {
  BatchPlan plan;
  plan.precision = model.train.precision;
  const StepMemory a = measure(8);
  const StepMemory b = measure(16);
  const double slope = std::max(1.0, static_cast<double>(b.peak - a.peak) / 8.0);
  const double base = static_cast<double>(a.peak) - slope * 8.0;
  auto extrapolated = [&](int64_t batch) {
    StepMemory m = b;
    m.batch = batch;
    m.peak = static_cast<int64_t>(std::llround(base + slope * static_cast<double>(batch)));
    return m;
  };
  int64_t batch = static_cast<int64_t>(std::floor((static_cast<double>(budget) - base) / slope));
  batch = std::clamp<int64_t>(batch, 0, max_batch);
  if (batch == 0) {
    plan.memory = extrapolated(1);
    return plan;
  }
  if (batch > verify_up_to) {
    // Beyond what may be dry-run: a line through dry runs at the largest allowed batches. The
    // peak is not exactly linear (allocator blocks, per-batch temporaries that grow faster than
    // the activations), so the slope of batches 8 to 16 underestimates large batches by up to
    // ~15 %; the slope near verify_up_to is the one that holds beyond it.
    const StepMemory lo = measure(std::max<int64_t>(16, verify_up_to / 2));
    const StepMemory hi = measure(verify_up_to);
    const double far_slope = std::max(
        slope, static_cast<double>(hi.peak - lo.peak) / static_cast<double>(hi.batch - lo.batch));
    const double far_base =
        static_cast<double>(hi.peak) - far_slope * static_cast<double>(hi.batch);
    batch = static_cast<int64_t>(std::floor((static_cast<double>(budget) - far_base) / far_slope));
    batch = std::clamp<int64_t>(batch, verify_up_to, max_batch);
    if (hi.peak > budget) batch = verify_up_to;  // the dry runs say the line was wrong
    plan.batch = batch;
    plan.memory = hi;
    plan.memory.batch = batch;
    plan.memory.peak =
        static_cast<int64_t>(std::llround(far_base + far_slope * static_cast<double>(batch)));
    if (batch > verify_up_to) return plan;
    // Fall through: verify_up_to itself is checked and corrected below.
  }
  // Correct the line with dry runs, closing in on the answer from both sides: `fit` is the
  // largest batch a dry run found within the budget, `over` the smallest found beyond it. The
  // next batch tried is the line's guess from the last dry run while it falls strictly between
  // them, else their midpoint (or double `fit` while nothing was over). The line alone is not
  // enough: under 16-mixed the peak at small batches is that of the optimizer step, flat in the
  // batch, so the slope of batches 8 to 16 read 1 byte per sample and the correction walked
  // from 65536 down to 1 and back up to 7, where batch 1000 fitted.
  StepMemory fit_mem;
  int64_t fit = 0, over = max_batch + 1;
  for (const StepMemory* s : {&a, &b}) {
    if (s->batch > max_batch) continue;
    if (s->peak <= budget && s->batch > fit) {
      fit = s->batch;
      fit_mem = *s;
    }
    if (s->peak > budget) over = std::min(over, s->batch);
  }
  int64_t guess = batch;
  for (int i = 0; i < 24 && over - fit > 1; ++i) {
    int64_t next = guess;
    if (next <= fit || next >= over)
      next = over > max_batch ? std::min(max_batch, std::max<int64_t>(1, 2 * fit))
                              : fit + (over - fit) / 2;
    const StepMemory m = measure(next);
    if (m.peak <= budget) {
      fit = next;
      fit_mem = m;
      guess = next + static_cast<int64_t>(std::floor((budget - m.peak) / slope));
      if (guess == next) guess = next + 1;
    } else {
      over = next;
      guess =
          next - std::max<int64_t>(1, static_cast<int64_t>(std::ceil((m.peak - budget) / slope)));
    }
  }
  if (fit == 0) {
    plan.memory = measure(1);
    return plan;  // batch 0: not even one sample fits
  }
  plan.batch = fit;
  plan.memory = fit_mem;
  plan.measured = true;
  return plan;
}

// The bytes one more sample adds to the peak, from the dry runs made: the slope between the
// largest batch run and the largest run at most half its batch, where the peak grows with the
// batch. Where it is flat there (the optimizer step, not the activations, sets the peak of small
// batches under 16-mixed), dry runs at doubling batches up to verify_up_to look for where it
// grows, and the slope is taken there. 0 where it never grew.
template <class Measure>
double marginal_bytes_per_sample(std::vector<StepMemory> runs, int64_t verify_up_to,
                                 const Measure& measure) {
  std::sort(runs.begin(), runs.end(),
            [](const StepMemory& x, const StepMemory& y) { return x.batch < y.batch; });
  const StepMemory hi = runs.back();
  const StepMemory* lo = nullptr;
  for (const StepMemory& r : runs)
    if (2 * r.batch <= hi.batch) lo = &r;
  auto slope = [](const StepMemory& x, const StepMemory& y) {
    return static_cast<double>(y.peak - x.peak) / static_cast<double>(y.batch - x.batch);
  };
  if (lo != nullptr && hi.peak > lo->peak) return slope(*lo, hi);
  for (int64_t batch = 2 * hi.batch; 2 * batch <= verify_up_to; batch *= 2) {
    const StepMemory grown = measure(batch);
    if (grown.peak <= hi.peak) continue;
    // `grown` is past the flat part; a run at twice its batch is too.
    const StepMemory twice = measure(2 * batch);
    return twice.peak > grown.peak ? slope(grown, twice) : 0.0;
  }
  return 0.0;
}

}  // namespace

BatchPlan plan_largest_batch(const PlanModel& model, int64_t budget, int64_t max_batch,
                             int64_t verify_up_to) {
  std::vector<StepMemory> runs;
  auto measure = [&](int64_t batch) {
    runs.push_back(measure_step_memory(model, batch));
    return runs.back();
  };
  BatchPlan plan = search_largest_batch(model, budget, max_batch, verify_up_to, measure);
  plan.bytes_per_sample = marginal_bytes_per_sample(runs, verify_up_to, measure);
  return plan;
}

namespace {

// From `fit` units (layers, or widths in heads) whose dry run `fit_mem` fits the budget, grows
// while dry runs fit: one unit more first (where the fitted curve was right, that one run shows
// `fit` is the largest), then steps that double, then bisection, at most `max_runs` dry runs.
// The curves through small shapes can also overestimate the peak at large ones: the 4-bit GPT's
// small widths dequantize each weight whole, the large ones in chunks of at most 1 MiB, so the
// quadratic planned width 668 (20 of 32 MiB) where about 900 fits.
template <class Measure>
int64_t grow_while_it_fits(int64_t fit, StepMemory& fit_mem, int64_t budget, int max_runs,
                           const Measure& measure) {
  int64_t step = 1, over = 0;  // over: the smallest size known not to fit (0: none yet)
  for (int i = 0; i < max_runs; ++i) {
    const int64_t next = over == 0 ? fit + step : fit + (over - fit) / 2;
    if (next <= fit) break;
    const StepMemory m = measure(next);
    if (m.peak <= budget) {
      fit = next;
      fit_mem = m;
      if (over == 0) step *= 2;
    } else {
      over = next;
    }
  }
  return fit;
}

}  // namespace

GptShapePlan plan_largest_gpt_shape(const PlanModel& model, int64_t budget) {
  MANTISSA_CHECK(model.train.model == "gpt", "plan", "width/depth plans are for --model gpt");
  const int64_t batch = model.train.batch_size;
  const int64_t heads = model.gpt.heads;
  GptShapePlan out;
  // Depth: the peak is linear in the number of blocks.
  {
    PlanModel m = model;
    m.gpt.layers = 1;
    const StepMemory one = measure_step_memory(m, batch);
    m.gpt.layers = 2;
    const StepMemory two = measure_step_memory(m, batch);
    const double per_layer = std::max<double>(1.0, static_cast<double>(two.peak - one.peak));
    const double base = static_cast<double>(one.peak) - per_layer;
    out.layers = std::max<int64_t>(
        0, static_cast<int64_t>(std::floor((static_cast<double>(budget) - base) / per_layer)));
    // The line through one and two blocks misses what grows with depth beyond two (the
    // backward's saved state of every block at once): dry-run the planned depth and step down
    // until it fits.
    for (int i = 0; i < 8 && out.layers > 0; ++i) {
      m.gpt.layers = out.layers;
      out.at_layers = measure_step_memory(m, batch);
      if (out.at_layers.peak <= budget) break;
      const int64_t over = out.at_layers.peak - budget;
      out.layers -= std::max<int64_t>(1, static_cast<int64_t>(std::ceil(over / per_layer)));
    }
    if (out.layers <= 0) {
      out.layers = 0;
      out.at_layers = one;
    } else if (out.at_layers.peak <= budget) {
      out.layers = grow_while_it_fits(out.layers, out.at_layers, budget, 12, [&](int64_t n) {
        m.gpt.layers = n;
        return measure_step_memory(m, batch);
      });
    }
  }
  // Width: weights, gradients and state grow with width^2, activations with width; a
  // quadratic through three dry runs.
  {
    PlanModel m = model;
    const double w[3] = {8.0 * heads, 16.0 * heads, 24.0 * heads};
    double p[3];
    for (int i = 0; i < 3; ++i) {
      m.gpt.width = static_cast<int64_t>(w[i]);
      p[i] = static_cast<double>(measure_step_memory(m, batch).peak);
    }
    // Newton's divided differences: p(x) = p0 + d1 (x - w0) + d2 (x - w0)(x - w1).
    const double d01 = (p[1] - p[0]) / (w[1] - w[0]), d12 = (p[2] - p[1]) / (w[2] - w[1]);
    const double d2 = (d12 - d01) / (w[2] - w[0]);
    auto peak_at = [&](double x) { return p[0] + d01 * (x - w[0]) + d2 * (x - w[0]) * (x - w[1]); };
    int64_t lo = 0, hi = 1;  // in multiples of heads
    while (peak_at(static_cast<double>(hi * heads)) <= static_cast<double>(budget) &&
           hi < (1 << 20))
      hi *= 2;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      (peak_at(static_cast<double>(mid * heads)) <= static_cast<double>(budget) ? lo : hi) = mid;
    }
    // The quadratic through small widths misses terms that grow faster at large ones: dry-run
    // the planned width and step down by one head's worth at a time until it fits.
    for (int i = 0; i < 8 && lo > 0; ++i) {
      m.gpt.width = lo * heads;
      out.at_width = measure_step_memory(m, batch);
      if (out.at_width.peak <= budget) break;
      const double x = static_cast<double>(lo * heads);
      const double per_head = std::max(1.0, (d01 + d2 * (2 * x - w[0] - w[1])) * heads);
      const double over = static_cast<double>(out.at_width.peak - budget);
      lo -= std::max<int64_t>(1, static_cast<int64_t>(std::ceil(over / per_head)));
    }
    lo = std::max<int64_t>(lo, 0);
    if (lo > 0 && out.at_width.peak <= budget) {
      lo = grow_while_it_fits(lo, out.at_width, budget, 12, [&](int64_t units) {
        m.gpt.width = units * heads;
        return measure_step_memory(m, batch);
      });
    }
    out.width = lo * heads;
    if (lo == 0) out.at_width = StepMemory{};
  }
  return out;
}

std::string batch_plan_table(const std::vector<BatchPlan>& plans, int64_t budget, int64_t max_batch,
                             int64_t data_set_size) {
  const bool cap_is_data_set = data_set_size > 0 && max_batch == data_set_size;
  // The first column 12 wide, or as wide as the longest name ("transformer-engine" is 18):
  // a longer name pushed its row's numbers out from under their headers.
  size_t w = 12;
  for (const BatchPlan& p : plans) w = std::max(w, p.precision.size());
  std::string out = fmt::format("{:<{}} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n",
                                "precision", w, "batch", "peak", "weights", "gradients",
                                "optimizer", "activations", "per sample", "checked");
  bool whole_set_fits = false;
  for (const BatchPlan& p : plans) {
    const StepMemory& m = p.memory;
    const std::string batch = p.batch == 0 ? "none" : fmt::format("{}", p.batch);
    // At the cap the answer is the cap, not what the budget allows (a dry run or not).
    const bool at_cap = p.batch == max_batch;
    whole_set_fits |= at_cap && cap_is_data_set;
    const std::string checked =
        at_cap         ? fmt::format("{}{}",
                             cap_is_data_set ? "whole training set fits" : "capped at --max-batch",
                             p.measured ? " (dry run)" : "")
        : p.measured   ? "dry run at this batch"
        : p.batch == 0 ? "batch 1 does not fit"
                       : "extrapolated";
    out += fmt::format(
        "{:<{}} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", p.precision, w, batch,
        format_bytes(m.peak), format_bytes(m.weights), format_bytes(m.gradients),
        format_bytes(m.optimizer_state), format_bytes(m.activations()),
        p.bytes_per_sample > 0 ? format_fractional_size(p.bytes_per_sample) : "-", checked);
  }
  out += fmt::format(
      "budget {} for weights, gradients, optimizer state and activations (the data set is not "
      "counted); `mantissa train --memory-limit {} --batch-size N` enforces it\n",
      format_bytes(budget), budget);
  if (whole_set_fits) {
    out += fmt::format(
        "\"whole training set fits\": a batch of all {} training samples fits within the budget; "
        "a smaller --memory shows where the precisions differ\n",
        data_set_size);
  }
  // An extrapolated batch was never run: the peak's growth bends with the batch, and a line
  // through small batches has promised up to ~15 % too many samples (docs/memory_planner.md).
  int64_t largest_unmeasured = 0;
  for (const BatchPlan& p : plans) {
    if (!p.measured && p.batch != max_batch && p.batch != 0)
      largest_unmeasured = std::max(largest_unmeasured, p.batch);
  }
  if (largest_unmeasured > 0) {
    out += fmt::format(
        "extrapolated batches were not dry-run and may not fit (a line through small batches "
        "has planned up to ~15 % more samples than fit): --verify-up-to {} measures them\n",
        largest_unmeasured);
  }
  return out;
}

}  // namespace mantissa::recipes
