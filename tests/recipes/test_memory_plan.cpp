// `mantissa plan` and --memory-limit (docs/memory_planner.md): the dry run splits the peak
// into weights, gradients, optimizer state and activations; the planned batch of the MLP
// trains under the budget, and 1.25x of it stops with the out-of-memory error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mantissa/core/allocator.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/memory_plan.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

PlanModel small_mlp(const std::string& precision) {
  PlanModel m;
  m.train.model = "mlp";
  m.train.hidden = "64";
  m.train.precision = precision;
  return m;
}

TEST(MemoryPlan, ParsesSizes) {
  EXPECT_EQ(parse_byte_size("8GiB", "--memory"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("512MiB", "--memory"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GB", "--memory"), 1500000000);
  EXPECT_EQ(parse_byte_size("4096", "--memory"), 4096);
  EXPECT_EQ(parse_byte_size("2m", "--memory"), int64_t{2} << 20);
  testing::expect_error([] { parse_byte_size("8 parsecs", "--memory"); },
                        "--memory expects a size such as 8GiB");
  testing::expect_error([] { parse_byte_size("-1GiB", "--memory"); }, "--memory");
}

TEST(MemoryPlan, DryRunSplitsThePeak) {
  const StepMemory m = measure_step_memory(small_mlp("32-true"), 32);
  const int64_t params = 784 * 64 + 64 + 64 * 10 + 10;
  EXPECT_EQ(m.weights, params * 4);
  EXPECT_EQ(m.gradients, params * 4);
  EXPECT_EQ(m.optimizer_state, params * 8);  // AdamW: two fp32 moments
  EXPECT_GT(m.activations(), 32 * 784 * 4);  // at least the batch itself
  const StepMemory half = measure_step_memory(small_mlp("bf16-true"), 32);
  EXPECT_EQ(half.weights, params * 2);
  EXPECT_LT(half.peak, m.peak);
}

// `plan --lora-rank` (and the quantized layers' flags) reach the dry runs: with adapters only
// they have gradients and optimizer state, QLoRA's point.
TEST(MemoryPlan, DryRunsTrainTheAdaptersWithLoraRank) {
  PlanModel lora = small_mlp("nf4");
  lora.train.quant.lora_rank = 4;
  const StepMemory m = measure_step_memory(lora, 32);
  // Adapters: A (4 x in) and B (out x 4) per Linear; the biases stay trainable too.
  const int64_t adapters = 4 * 784 + 64 * 4 + 4 * 64 + 10 * 4;
  const int64_t trainable = adapters + 64 + 10;
  EXPECT_EQ(m.gradients, trainable * 4);
  EXPECT_EQ(m.optimizer_state, trainable * 8);
  const StepMemory full = measure_step_memory(small_mlp("32-true"), 32);
  EXPECT_LT(m.weights, full.weights);
}

TEST(MemoryPlan, PlannedBatchTrainsAndOneQuarterMoreRunsOutOfMemory) {
  if (!std::filesystem::exists(data::FashionMNIST::default_root() +
                               "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  }
  const int64_t budget = int64_t{3} << 20;  // 3 MiB: a few hundred images of the small MLP
  const BatchPlan plan = plan_largest_batch(small_mlp("32-true"), budget, 65536, 2048);
  ASSERT_TRUE(plan.measured);
  ASSERT_GT(plan.batch, 16);
  EXPECT_LE(plan.memory.peak, budget);
  EXPECT_FALSE(memory_limit().has_value());

  TrainOptions o = small_mlp("32-true").train;
  o.quiet = true;
  o.epochs = 1;
  o.train_subset = 4 * plan.batch;
  o.memory_limit = std::to_string(budget);
  o.batch_size = plan.batch;
  const TrainMetrics fits = run_training(o);
  EXPECT_LE(fits.peak_training_memory_bytes, budget);
  EXPECT_FALSE(memory_limit().has_value());  // the run's budget ends with it

  o.batch_size = plan.batch * 5 / 4;
  try {
    run_training(o);
    ADD_FAILURE() << "1.25x the planned batch (" << o.batch_size << ") fit in the budget";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("memory budget of 3.00 MiB"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(memory_limit().has_value());
}

// A batch beyond --verify-up-to (the default, 2048) is extrapolated: the dry run at the planned
// batch must still fit (the slope of batches 8 to 16 alone put this one ~7 % over the budget;
// the bytes per sample settle above batch ~1000).
TEST(MemoryPlan, ExtrapolatedBatchFitsItsBudget) {
  const PlanModel model = small_mlp("32-true");
  const int64_t budget = int64_t{24} << 20;
  const BatchPlan plan = plan_largest_batch(model, budget, 65536, 2048);
  ASSERT_GT(plan.batch, 2048) << "the budget should give a batch beyond verify_up_to";
  EXPECT_FALSE(plan.measured);
  const StepMemory at = measure_step_memory(model, plan.batch);
  EXPECT_LE(at.peak, budget) << "planned batch " << plan.batch;
  EXPECT_GT(at.peak, budget * 8 / 10) << "planned batch " << plan.batch << " leaves too much";
}

// Under 16-mixed the peak at small batches is the optimizer step's, flat in the batch (batches
// 8 and 16 peak alike): the plan must still find the largest batch that fits, and one more must
// not (it planned 7 for a budget that holds batches of about 2000, walking a 1-byte slope).
TEST(MemoryPlan, FlatPeakAtSmallBatchesStillFindsTheLargestBatch) {
  PlanModel model = small_mlp("16-mixed");
  model.train.hidden = "256";  // `mantissa plan --model mlp`'s default
  const int64_t budget = int64_t{16} << 20;
  const BatchPlan plan = plan_largest_batch(model, budget, 65536, 2048);
  ASSERT_TRUE(plan.measured) << plan.batch << " " << plan.memory.peak;
  EXPECT_GT(plan.batch, 256);
  EXPECT_LE(measure_step_memory(model, plan.batch).peak, budget);
  EXPECT_GT(measure_step_memory(model, plan.batch + 1).peak, budget);
  EXPECT_GT(plan.bytes_per_sample, 1024);  // the slope the answer implies, not 1 byte
}

// Where nothing fits, the per-sample cost is still the peak's slope where it grows (dry runs
// at doubling batches past the flat part), not the 1 byte that a flat or falling slope from
// batch 8 to 16 was clamped to (16-mixed: the optimizer step sets the peak of small batches).
TEST(MemoryPlan, FlatPeakPerSampleIsTheSlopeWhereThePeakGrows) {
  PlanModel model = small_mlp("16-mixed");
  model.train.hidden = "256";
  const BatchPlan plan = plan_largest_batch(model, int64_t{3} << 20, 65536, 2048);
  EXPECT_EQ(plan.batch, 0);
  // The MLP's activations per sample: input, hidden and logits in fp32 and fp16, kept and
  // temporary: between 2 and 16 KiB (the slope at large batches reads 7.16 KiB).
  EXPECT_GT(plan.bytes_per_sample, 2048);
  EXPECT_LT(plan.bytes_per_sample, 16384);
}

// An image model's batch is at most its training set: 8 GiB holds all 60000 Fashion-MNIST
// images at once, and the plan says so instead of promising more samples than there are.
TEST(MemoryPlan, BatchIsCappedAtTheTrainingSet) {
  const PlanModel model = small_mlp("bf16-true");
  const int64_t n = data::FashionMNIST::kTrainSize;
  const BatchPlan plan = plan_largest_batch(model, int64_t{8} << 30, n, 2048);
  EXPECT_EQ(plan.batch, 60000);
  EXPECT_GT(plan.bytes_per_sample, 1024);
  const std::string t = batch_plan_table({plan}, int64_t{8} << 30, n, n);
  EXPECT_NE(t.find(" 60000 "), std::string::npos) << t;
  EXPECT_NE(t.find("whole training set fits\n"), std::string::npos) << t;
  EXPECT_NE(t.find("a batch of all 60000 training samples fits within the budget"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("65536"), std::string::npos) << t;
  EXPECT_EQ(t.find("extrapolated batches"), std::string::npos) << t;
}

// Per-sample costs are means, in KiB with two decimals (MiB, GiB when larger), never bare bytes.
TEST(MemoryPlan, FractionalSizesReadInKibAndUp) {
  EXPECT_EQ(format_fractional_size(1), "0.00 KiB");
  EXPECT_EQ(format_fractional_size(700), "0.68 KiB");
  EXPECT_EQ(format_fractional_size(6256.64), "6.11 KiB");
  EXPECT_EQ(format_fractional_size(1023.5 * 1024), "1023.50 KiB");
  EXPECT_EQ(format_fractional_size(1024.0 * 1024 - 1), "1.00 MiB");  // not "1024.00 KiB"
  EXPECT_EQ(format_fractional_size(5.5 * 1024 * 1024), "5.50 MiB");
  EXPECT_EQ(format_fractional_size(3.0 * 1024 * 1024 * 1024), "3.00 GiB");
}

TEST(MemoryPlan, TablePerSampleIsInKib) {
  BatchPlan p, flat;
  p.precision = "32-true";
  p.batch = 900;
  p.measured = true;
  p.bytes_per_sample = 6256.64;
  flat.precision = "16-mixed";
  flat.bytes_per_sample = 0;  // the peak never grew: no figure
  const std::string t = batch_plan_table({p, flat}, 8 << 20, 60000, 60000);
  EXPECT_NE(t.find("     6.11 KiB  dry run at this batch\n"), std::string::npos) << t;
  EXPECT_NE(t.find("            -  batch 1 does not fit\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("6257 B"), std::string::npos) << t;
  EXPECT_EQ(t.find("whole training set"), std::string::npos) << t;
}

// The GPT's planned width and depth are dry-run themselves: both fit, and one head's worth of
// width or one layer more does not.
TEST(MemoryPlan, GptWidthAndDepthFitAndOneMoreDoesNot) {
  PlanModel model;
  model.train.model = "gpt";
  model.train.precision = "32-true";
  model.train.batch_size = 8;
  model.gpt.layers = 2;
  model.gpt.heads = 4;
  model.gpt.context = 32;
  model.gpt.width = 32;
  const int64_t budget = int64_t{24} << 20;
  const GptShapePlan plan = plan_largest_gpt_shape(model, budget);
  ASSERT_GT(plan.width, 0);
  ASSERT_GT(plan.layers, 0);
  PlanModel m = model;
  m.gpt.width = plan.width;
  EXPECT_LE(measure_step_memory(m, 8).peak, budget) << "width " << plan.width;
  m.gpt.width = plan.width + model.gpt.heads;
  EXPECT_GT(measure_step_memory(m, 8).peak, budget) << "width " << m.gpt.width;
  m = model;
  m.gpt.layers = plan.layers;
  EXPECT_LE(measure_step_memory(m, 8).peak, budget) << "layers " << plan.layers;
  m.gpt.layers = plan.layers + 1;
  EXPECT_GT(measure_step_memory(m, 8).peak, budget) << "layers " << m.gpt.layers;
}

// The quadratic through small widths can overestimate the peak at large ones: a 4-bit GPT
// dequantizes each weight whole while it is small and in chunks of at most 1 MiB once it is
// large, so the curve planned a width well below the largest that fits (668 at 20 of 32 MiB
// in this shape's `mantissa plan`, where 938 fits) and no dry run looked above it. The plan
// now grows by dry runs while they fit: its width fits and one head more does not.
TEST(MemoryPlan, QuantizedGptWidthIsTheLargestThatFits) {
  PlanModel model;
  model.train.model = "gpt";
  model.train.precision = "nf4-dq";
  model.train.quant.lora_rank = 4;
  model.train.batch_size = 4;
  model.gpt.layers = 2;
  model.gpt.heads = 2;
  model.gpt.context = 32;
  model.gpt.width = 64;
  const int64_t budget = int64_t{16} << 20;
  const GptShapePlan plan = plan_largest_gpt_shape(model, budget);
  ASSERT_GT(plan.width, 0);
  EXPECT_LE(plan.at_width.peak, budget);
  PlanModel m = model;
  m.gpt.width = plan.width;
  EXPECT_LE(measure_step_memory(m, 4).peak, budget) << "width " << plan.width;
  m.gpt.width = plan.width + model.gpt.heads;
  EXPECT_GT(measure_step_memory(m, 4).peak, budget) << "width " << m.gpt.width;
  // The planned width uses the budget: within a few percent of it.
  EXPECT_GT(plan.at_width.peak, budget * 9 / 10) << "width " << plan.width;
}

TEST(MemoryPlan, TableNamesEachColumn) {
  BatchPlan p;
  p.precision = "bf16-true";
  p.batch = 100;
  p.memory = {.batch = 100,
              .peak = 3 << 20,
              .weights = 1 << 20,
              .gradients = 1 << 19,
              .optimizer_state = 1 << 19};
  p.measured = true;
  const std::string t = batch_plan_table({p}, 4 << 20, 65536);
  for (const char* col :
       {"precision", "batch", "weights", "gradients", "optimizer", "activations", "per sample"})
    EXPECT_NE(t.find(col), std::string::npos) << col;
  EXPECT_NE(t.find("1.00 MiB"), std::string::npos) << t;  // activations: 3 - 1 - 0.5 - 0.5
  EXPECT_NE(t.find("dry run at this batch"), std::string::npos) << t;
  EXPECT_EQ(t.find("extrapolated"), std::string::npos) << t;  // every batch measured: no caveat
}

// An extrapolated batch was never run, so the table says it may not fit and which
// --verify-up-to would measure it (the largest such batch over the precisions).
TEST(MemoryPlan, TableSaysExtrapolatedBatchesAreUnmeasured) {
  BatchPlan a, b, capped;
  a.precision = "32-true";
  a.batch = 12183;
  b.precision = "bf16-true";
  b.batch = 20000;
  capped.precision = "16-true";
  capped.batch = 65536;  // --max-batch: not a prediction of what fits
  const std::string t = batch_plan_table({a, b, capped}, 64 << 20, 65536);
  EXPECT_NE(t.find("extrapolated batches were not dry-run and may not fit"), std::string::npos)
      << t;
  EXPECT_NE(t.find("--verify-up-to 20000 measures them"), std::string::npos) << t;
}

// A precision name longer than the first column ("transformer-engine") widens it for every
// row, so each number stays under its header (not its own row pushed 6 characters right).
TEST(MemoryPlan, TableAlignsLongPrecisionNames) {
  BatchPlan a, b;
  a.precision = "32-true";
  a.batch = 981;
  a.measured = true;
  b.precision = "transformer-engine";
  b.batch = 3811;
  b.measured = true;
  const std::string t = batch_plan_table({a, b}, 16 << 20, 65536);
  std::vector<std::string> lines;
  for (size_t pos = 0, nl; (nl = t.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(t.substr(pos, nl - pos));
  ASSERT_GE(lines.size(), 3u) << t;
  // The batch column ends at the same character in the header and both rows.
  const size_t end = lines[0].find("batch") + std::string("batch").size();
  EXPECT_EQ(lines[1].find("981") + 3, end) << t;
  EXPECT_EQ(lines[2].find("3811") + 4, end) << t;
}

}  // namespace
}  // namespace mantissa::recipes
