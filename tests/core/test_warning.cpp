// warn / warn_once (mantissa/core/warning.h): the line format, and that warn_once says each
// distinct message once per process however often it is reached.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mantissa/core/warning.h"

namespace mantissa {
namespace {

size_t count_of(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++n;
  return n;
}

TEST(Warning, WarnOnceSaysEachMessageOnce) {
  ::testing::internal::CaptureStderr();
  warn("plain message");
  warn("plain message");
  warn_once("once message A (test_warning.cpp)");
  warn_once("once message B (test_warning.cpp)");
  warn_once("once message A (test_warning.cpp)");
  warn_once("once message B (test_warning.cpp)");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "mantissa: warning: plain message\n"), 2u) << err;
  EXPECT_EQ(count_of(err, "mantissa: warning: once message A (test_warning.cpp)\n"), 1u) << err;
  EXPECT_EQ(count_of(err, "mantissa: warning: once message B (test_warning.cpp)\n"), 1u) << err;
}

// A WarningRecorder keeps what was said during its life (warn and the first warn_once), in
// order, and nothing from before or after it; nested recorders each see their own span.
TEST(Warning, RecorderKeepsWhatWasSaidWhileItLived) {
  ::testing::internal::CaptureStderr();
  warn("before the recorder (test_warning.cpp)");
  std::vector<std::string> outer_messages;
  std::vector<std::string> inner_messages;
  {
    const WarningRecorder outer;
    warn("first (test_warning.cpp)");
    {
      const WarningRecorder inner;
      warn_once("recorded once (test_warning.cpp)");
      warn_once("recorded once (test_warning.cpp)");
      inner_messages = inner.messages();
    }
    outer_messages = outer.messages();
  }
  warn("after the recorder (test_warning.cpp)");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(outer_messages, (std::vector<std::string>{"first (test_warning.cpp)",
                                                      "recorded once (test_warning.cpp)"}));
  EXPECT_EQ(inner_messages, (std::vector<std::string>{"recorded once (test_warning.cpp)"}));
  // Still printed as before.
  EXPECT_EQ(count_of(err, "mantissa: warning: first (test_warning.cpp)\n"), 1u) << err;
}

// While a WarningSilencer lives nothing is printed or recorded, and a warn_once silenced then
// is still said once afterwards.
TEST(Warning, SilencerSaysNothingAndKeepsWarnOnceUnsaid) {
  ::testing::internal::CaptureStderr();
  std::vector<std::string> recorded;
  {
    const WarningRecorder recorder;
    {
      const WarningSilencer silent;
      warn("silenced (test_warning.cpp)");
      warn_once("silenced once (test_warning.cpp)");
    }
    warn_once("silenced once (test_warning.cpp)");
    recorded = recorder.messages();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "silenced (test_warning.cpp)"), 0u) << err;
  EXPECT_EQ(count_of(err, "mantissa: warning: silenced once (test_warning.cpp)\n"), 1u) << err;
  EXPECT_EQ(recorded, (std::vector<std::string>{"silenced once (test_warning.cpp)"}));
}

}  // namespace
}  // namespace mantissa
