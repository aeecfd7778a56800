// The delayed-scaling recipe and state machine (docs/fp8.md "Scales and the amax history"),
// step by step on a written-down amax sequence: history roll, max vs most_recent, margin, zero
// and non-finite amax, the FLT_MAX clamp, scale_inv.
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"
#include "support/test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace mantissa::fp8 {
namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Fp8Recipe, DefaultsAreTransformerEngines) {
  const DelayedScaling r;
  EXPECT_EQ(r.fp8_format, Format::kHybrid);
  EXPECT_EQ(r.margin, 0);
  EXPECT_EQ(r.amax_history_len, 1024);
  EXPECT_EQ(r.amax_compute_algo, AmaxComputeAlgo::kMax);
  EXPECT_TRUE(r.reduce_amax);
}

TEST(Fp8Recipe, RoleDtypes) {
  DelayedScaling hybrid;
  EXPECT_EQ(hybrid.dtype_of(Role::kInput), kFloat8_e4m3fn);
  EXPECT_EQ(hybrid.dtype_of(Role::kWeight), kFloat8_e4m3fn);
  EXPECT_EQ(hybrid.dtype_of(Role::kGradOutput), kFloat8_e5m2);
  DelayedScaling e4m3;
  e4m3.fp8_format = Format::kE4M3;
  EXPECT_EQ(e4m3.dtype_of(Role::kGradOutput), kFloat8_e4m3fn);
  EXPECT_EQ(fp8_max(kFloat8_e4m3fn), 448.0f);
  EXPECT_EQ(fp8_max(kFloat8_e5m2), 57344.0f);
  EXPECT_THROW(fp8_max(kFloat32), Error);
}

TEST(Fp8Recipe, ParsingAndBadValues) {
  EXPECT_EQ(format_from_string("hybrid"), Format::kHybrid);
  EXPECT_EQ(format_from_string("E4M3"), Format::kE4M3);
  EXPECT_EQ(amax_compute_algo_from_string("most_recent"), AmaxComputeAlgo::kMostRecent);
  try {
    format_from_string("E5M2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
  }
  try {
    format_from_string("e3m4");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("E4M3, HYBRID"), std::string::npos) << e.what();
  }
  EXPECT_THROW(amax_compute_algo_from_string("mean"), Error);
  // A near miss names the value meant, as a misspelt precision does (it listed the valid
  // values only).
  mantissa::testing::expect_error(
      [] { format_from_string("hybird"); },
      {"unknown fp8_format 'hybird' (did you mean 'HYBRID'?); valid values are: "
       "E4M3, HYBRID"});
  mantissa::testing::expect_error(
      [] { amax_compute_algo_from_string("mostrecent"); },
      {"unknown amax_compute_algo 'mostrecent' (did you mean 'most_recent'?); "
       "valid values are: max, most_recent"});
  mantissa::testing::expect_error([] { amax_compute_algo_from_string("average"); },
                                  {"unknown amax_compute_algo 'average'; valid values are"});
  DelayedScaling r;
  r.amax_history_len = 0;
  EXPECT_THROW(r.validate(), Error);
  EXPECT_THROW(ScalingState(3, 0), Error);
}

TEST(Fp8Recipe, JsonRoundTrip) {
  DelayedScaling r;
  r.fp8_format = Format::kE4M3;
  r.margin = -2;
  r.amax_history_len = 16;
  r.amax_compute_algo = AmaxComputeAlgo::kMostRecent;
  EXPECT_EQ(DelayedScaling::from_json(r.to_json()), r);
  EXPECT_EQ(r.to_json()["fp8_format"], "E4M3");
  EXPECT_THROW(DelayedScaling::from_json({{"amax_history_len", 0}}), Error);
}

TEST(Fp8Meta, StartsAtScaleOneAndZeroHistory) {
  ScalingState s(3, 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.scale_of(i), 1.0f);
    EXPECT_EQ(s.scale_inv_of(i), 1.0f);
    EXPECT_EQ(s.history_of(i), std::vector<float>(4, 0.0f));
  }
  EXPECT_EQ(s.amax_history.shape(), (Shape{4, 3}));
  EXPECT_EQ(s.scale.dtype(), kFloat32);
}

// The worked example: L = 4, E4M3 (fp8_max 448), margin 0. Each row: the amax seen in the
// step, then the scale the step used and the scale produced after it, for "max" and
// "most_recent", and the "max" history after the roll.
struct Step {
  float amax;
  float used_max, next_max;
  std::vector<float> history_max;
  float used_recent, next_recent;
};

TEST(Fp8Meta, WorkedExampleStepByStep) {
  const std::vector<Step> steps = {
      {2.0f, 1, 224, {0, 0, 0, 2}, 1, 224},
      {3.5f, 224, 128, {0, 0, 2, 3.5f}, 224, 128},
      {1.0f, 128, 128, {0, 2, 3.5f, 1}, 128, 448},
      {0.5f, 128, 128, {0, 3.5f, 1, 0.5f}, 448, 896},
      {0.25f, 128, 128, {0, 1, 0.5f, 0.25f}, 896, 1792},
      {0.25f, 128, 448, {0, 0.5f, 0.25f, 0.25f}, 1792, 1792},
      // An all-zero tensor: no roll, scale kept.
      {0.0f, 448, 448, {0, 0.5f, 0.25f, 0.25f}, 1792, 1792},
      // The smallest float32 denormal: "max" still sees 0.5 in its window; "most_recent"
      // divides by it, overflows and clamps to FLT_MAX.
      {1e-45f, 448, 896, {0, 0.25f, 0.25f, 1e-45f}, 1792, kFltMax},
  };
  DelayedScaling max_recipe;
  max_recipe.amax_history_len = 4;
  DelayedScaling recent = max_recipe;
  recent.amax_compute_algo = AmaxComputeAlgo::kMostRecent;
  ScalingState by_max(1, 4), by_recent(1, 4);
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i + 1);
    const Step& st = steps[i];
    EXPECT_EQ(by_max.scale_of(0), st.used_max);
    EXPECT_EQ(by_recent.scale_of(0), st.used_recent);
    by_max.record_amax(0, st.amax);
    by_recent.record_amax(0, st.amax);
    EXPECT_EQ(by_max.update(0, 448.0f, max_recipe), st.amax != 0.0f);
    by_recent.update(0, 448.0f, recent);
    EXPECT_EQ(by_max.scale_of(0), st.next_max);
    EXPECT_EQ(by_recent.scale_of(0), st.next_recent);
    EXPECT_EQ(by_max.history_of(0), st.history_max);
  }
  EXPECT_EQ(by_max.scale_inv_of(0), 1.0f / 896.0f);
}

TEST(Fp8Meta, RecordKeepsTheMaximumOfTheStep) {
  ScalingState s(2, 3);
  s.record_amax(1, 3.0f);
  s.record_amax(1, 1.0f);
  EXPECT_EQ(s.current_amax(1), 3.0f);
  EXPECT_EQ(s.current_amax(0), 0.0f);
  // A NaN amax (a reducer's) is the step's amax from then on, as a NaN bit pattern stays the
  // largest under TransformerEngine's atomicMax on the bits.
  s.record_amax(1, kNaN);
  EXPECT_TRUE(std::isnan(s.current_amax(1)));
  s.record_amax(1, 5.0f);
  EXPECT_TRUE(std::isnan(s.current_amax(1)));
  EXPECT_EQ(s.current_amax(0), 0.0f);
}

// A NaN amax in the sequence, against TransformerEngine's fused update (kernel_bulk in
// common/recipe/delayed_scaling.cu): last_amax = H[0]; when last_amax != 0, which NaN is, the
// column rolls (H[L-1] = last_amax, H[0] = 0) and "max" takes fmaxf from 0 over the column
// before the roll, fmaxf passing over NaN; "most_recent" takes last_amax; the scale is
// 448 / amax when amax is finite and > 0, else the old one. L = 4, E4M3, margin 0.
//
// step amax  column before update  "max" amax -> scale   column after       most_recent
//  1   2     [2, 0, 0, 0]           2   -> 224            [0, 0, 0, 2]        2   -> 224
//  2   NaN   [NaN, 0, 0, 2]         2   -> 224            [0, 0, 2, NaN]      NaN -> 224 (kept)
//  3   1     [1, 0, 2, NaN]         2   -> 224            [0, 2, NaN, 1]      1   -> 448
//  4   0.5   [0.5, 2, NaN, 1]       2   -> 224            [0, NaN, 1, 0.5]    0.5 -> 896
//  5   0.25  [0.25, NaN, 1, 0.5]    1   -> 448            [0, 1, 0.5, 0.25]   .25 -> 1792
//  6   0.25  [0.25, 1, 0.5, 0.25]   1   -> 448            [0, 0.5, .25, .25]  .25 -> 1792
//  7   0.25  [0.25, .5, .25, .25]   0.5 -> 896            [0, .25, .25, .25]  .25 -> 1792
//
// Dropping the NaN instead (no roll at step 2) shifts the window one step later: step 5 would
// still see the 2 and keep 224.
TEST(Fp8Meta, NanAmaxRollsTheWindowAsTransformerEngine) {
  struct NanStep {
    float amax;
    std::vector<float> history_max;  // after the update; NaN compared as NaN
    float next_max, next_recent;
  };
  const std::vector<NanStep> steps = {
      {2.0f, {0, 0, 0, 2}, 224, 224},
      {kNaN, {0, 0, 2, kNaN}, 224, 224},
      {1.0f, {0, 2, kNaN, 1}, 224, 448},
      {0.5f, {0, kNaN, 1, 0.5f}, 224, 896},
      {0.25f, {0, 1, 0.5f, 0.25f}, 448, 1792},
      {0.25f, {0, 0.5f, 0.25f, 0.25f}, 448, 1792},
      {0.25f, {0, 0.25f, 0.25f, 0.25f}, 896, 1792},
  };
  DelayedScaling max_recipe;
  max_recipe.amax_history_len = 4;
  DelayedScaling recent = max_recipe;
  recent.amax_compute_algo = AmaxComputeAlgo::kMostRecent;
  ScalingState by_max(1, 4), by_recent(1, 4);
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i + 1);
    const NanStep& st = steps[i];
    by_max.record_amax(0, st.amax);
    by_recent.record_amax(0, st.amax);
    EXPECT_TRUE(by_max.update(0, 448.0f, max_recipe));  // every step rolls, NaN's too
    EXPECT_TRUE(by_recent.update(0, 448.0f, recent));
    EXPECT_EQ(by_max.scale_of(0), st.next_max);
    EXPECT_EQ(by_recent.scale_of(0), st.next_recent);
    const std::vector<float> h = by_max.history_of(0);
    ASSERT_EQ(h.size(), st.history_max.size());
    for (size_t k = 0; k < h.size(); ++k) {
      if (std::isnan(st.history_max[k])) {
        EXPECT_TRUE(std::isnan(h[k])) << "row " << k << ": " << h[k];
      } else {
        EXPECT_EQ(h[k], st.history_max[k]) << "row " << k;
      }
    }
    EXPECT_EQ(by_recent.history_of(0)[0], 0.0f);
  }
}

// With H[0] NaN, "max" is the largest of the other entries (fmaxf), not NaN: the scale moves
// when the entry dropped in the step before was the window's largest. L = 2, E4M3:
// step 1 amax 4: [4, 0] -> 4 -> 112, column [0, 4]; step 2 amax 1: [1, 4] -> 4 -> 112,
// column [0, 1]; step 3 NaN: [NaN, 1] -> fmaxf gives 1 -> 448, column [0, NaN]; step 4 amax 2:
// [2, NaN] -> 2 -> 224, column [0, 2].
TEST(Fp8Meta, NanCurrentAmaxTakesTheLargestOtherEntry) {
  DelayedScaling r;
  r.amax_history_len = 2;
  ScalingState s(1, 2);
  const std::vector<float> amaxes = {4.0f, 1.0f, kNaN, 2.0f};
  const std::vector<float> scales = {112.0f, 112.0f, 448.0f, 224.0f};
  for (size_t i = 0; i < amaxes.size(); ++i) {
    s.record_amax(0, amaxes[i]);
    s.update(0, 448.0f, r);
    EXPECT_EQ(s.scale_of(0), scales[i]) << "step " << i + 1;
  }
  EXPECT_EQ(s.history_of(0), (std::vector<float>{0.0f, 2.0f}));
}

TEST(Fp8Meta, MarginDividesByPowerOfTwo) {
  DelayedScaling r;
  r.amax_history_len = 2;
  for (int margin : {0, 1, 3, -1}) {
    r.margin = margin;
    ScalingState s(1, 2);
    s.record_amax(0, 7.0f);
    s.update(0, 57344.0f, r);
    EXPECT_EQ(s.scale_of(0), (57344.0f * std::ldexp(1.0f, -margin)) / 7.0f) << margin;
  }
}

TEST(Fp8Meta, InfiniteAmaxKeepsScaleWhileInWindow) {
  DelayedScaling r;
  r.amax_history_len = 3;
  ScalingState s(1, 3);
  s.record_amax(0, 4.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 112.0f);
  s.record_amax(0, kInf);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 112.0f);  // amax inf: kept
  s.record_amax(0, 1.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 112.0f);  // window [1, 4, inf] still holds inf
  s.record_amax(0, 1.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 112.0f);  // window [1, inf, 1]: inf is the oldest entry
  s.record_amax(0, 1.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 448.0f);  // window [1, 1, 1]: inf rolled out
}

TEST(Fp8Meta, HistoryLengthOneIsMostRecent) {
  DelayedScaling r;
  r.amax_history_len = 1;
  ScalingState s(1, 1);
  s.record_amax(0, 2.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 224.0f);
  s.record_amax(0, 8.0f);
  s.update(0, 448.0f, r);
  EXPECT_EQ(s.scale_of(0), 56.0f);
  EXPECT_EQ(s.history_of(0), std::vector<float>{0.0f});
}

TEST(Fp8Meta, CountsAreTakenAndReset) {
  ScalingState s;
  s.add_counts(2, {10, 2, 1});
  s.add_counts(2, {5, 1, 0});
  const CastCounts c = s.take_counts(2);
  EXPECT_EQ(c.total, 15);
  EXPECT_EQ(c.saturated, 3);
  EXPECT_EQ(c.flushed, 1);
  EXPECT_EQ(s.take_counts(2).total, 0);
}

}  // namespace
}  // namespace mantissa::fp8
