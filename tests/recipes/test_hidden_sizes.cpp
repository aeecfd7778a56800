// --hidden's sizes (recipes/image_run.h): a list with an empty item is no list of sizes; a
// trailing comma is not read as if absent ("16," is refused, not one layer of 16).
#include <gtest/gtest.h>

#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {
namespace {

TEST(ParseHiddenSizes, ListsWithAnEmptyItemAreRefused) {
  for (const char* hidden : {"16,", ",16", "16,,16", ",", ""}) {
    SCOPED_TRACE(hidden);
    EXPECT_FALSE(parse_hidden_sizes(hidden).has_value());
  }
  EXPECT_EQ(parse_hidden_sizes("512,256"), (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(parse_hidden_sizes("64"), (std::vector<int64_t>{64}));
}

}  // namespace
}  // namespace mantissa::recipes
