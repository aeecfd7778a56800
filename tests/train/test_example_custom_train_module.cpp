// examples/custom_train_module.cpp takes a [precision] argument; under 16-true its AdamW kept
// float16 moments and the run diverged ("the loss became NaN in optimizer step 4"). The example
// is run here in 16-true (CTest's example.custom_train_module runs its default, bf16-mixed).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

namespace {

namespace fs = std::filesystem;

// The example is built beside the test binary when MANTISSA_BUILD_EXAMPLES is on.
fs::path example_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path() / "example_custom_train_module";
}

TEST(ExampleCustomTrainModule, TrainsIn16True) {
  const fs::path example = example_path();
  if (example.empty() || !fs::exists(example)) GTEST_SKIP() << "the examples are not built";
  const std::string command = "'" + example.string() + "' 60 16-true 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (fgets(buf.data(), static_cast<int>(buf.size()), pipe)) out += buf.data();
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_EQ(out.find("NaN"), std::string::npos) << out;
  EXPECT_EQ(out.find("in float16"), std::string::npos) << "AdamW's state must be float32\n" << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m,
                                std::regex("after 60 steps: val_loss ([0-9.]+) "
                                           "val_acc (0\\.[0-9]+)")))
      << out;
  EXPECT_LT(std::stod(m[1]), 1.0) << out;
  EXPECT_GT(std::stod(m[2]), 0.6) << out;
}

}  // namespace
