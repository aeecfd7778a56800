// "Did you mean" helpers (include/mantissa/core/closest_names.h).
#include <gtest/gtest.h>

#include "mantissa/core/closest_names.h"

namespace mantissa {
namespace {

TEST(ClosestNames, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("adam", "adamw"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ClosestNames, NearestFirstLetterCaseAndUnderscoreIgnored) {
  const std::vector<std::string> names = {"bf16-mixed", "bf16-true", "16-mixed"};
  EXPECT_EQ(closest_names("BF16_MIXED", names, 2),
            (std::vector<std::string>{"bf16-mixed", "16-mixed"}));
}

TEST(ClosestNames, LikelyMeant) {
  const std::vector<std::string> names = {"adamw", "adam", "sgd", "adamw8bit", "adam8bit"};
  EXPECT_EQ(likely_meant("AdamW", names), "adamw");       // letter case only
  EXPECT_EQ(likely_meant("adamw8", names), "adamw8bit");  // the one name it begins
  EXPECT_EQ(likely_meant("adam8", names), "adam8bit");
  EXPECT_EQ(likely_meant("sgdd", names), "sgd");  // nearest, within the distance
  EXPECT_EQ(likely_meant("lion", names), "");     // nothing close
  EXPECT_EQ(likely_meant("ad", names), "adam");   // too short to begin a name: nearest (2)
  // Equal but for separators: that name, although "adamw8bit" is one substitution away too
  // (the tie went to the earlier candidate, so `--optimizer adam_8bit` suggested adamw8bit).
  EXPECT_EQ(likely_meant("adam_8bit", names), "adam8bit");
  EXPECT_EQ(likely_meant("adam-8bit", names), "adam8bit");
  EXPECT_EQ(likely_meant("Adam_W", names), "adamw");
  EXPECT_EQ(likely_meant("most-recent", {"max", "most_recent"}), "most_recent");
}

}  // namespace
}  // namespace mantissa
