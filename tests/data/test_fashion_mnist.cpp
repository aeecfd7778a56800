// FashionMNIST: decoding and normalisation on fixture files, root resolution, errors, and a
// smoke test on the real data set when the Debian package is installed.
#include "mantissa/data/fashion_mnist.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "data/idx_fixtures.h"

namespace mantissa::data {
namespace {
using namespace testing;

// Writes a 4-example "training set": gzipped images, plain labels (both spellings work).
void write_fixture_set(const TempDir& dir, const Bytes& labels = label_data(4)) {
  write_gzip(dir.file("train-images-idx3-ubyte.gz"), idx_bytes(0x803, {4, 28, 28}, image_data(4)));
  write_plain(dir.file("train-labels-idx1-ubyte"),
              idx_bytes(0x801, {static_cast<uint32_t>(labels.size())}, labels));
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DataFashionMNIST, DecodesAndNormalisesFixture) {
  TempDir dir;
  write_fixture_set(dir);
  const FashionMNIST ds(dir.str());
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.inputs().shape(), (Shape{4, 784}));
  EXPECT_EQ(ds.inputs().dtype(), kFloat32);
  EXPECT_EQ(ds.targets().dtype(), kInt64);
  EXPECT_EQ(ds.targets().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  const auto x = ds.inputs().to_vector<float>();
  auto expected = [](int pixel) {
    return (static_cast<float>(pixel) / 255.0f - 0.2860f) / 0.3530f;
  };
  EXPECT_FLOAT_EQ(x[0], expected(0));  // image 0, pixel 0 is 0
  EXPECT_FLOAT_EQ(x[255], expected(255));
  EXPECT_FLOAT_EQ(x[784 + 10], expected(17));  // image 1: (7 + 10) % 256
  EXPECT_NEAR(x[0], -0.810198, 1e-6);
  EXPECT_NEAR(x[255], 2.022663, 1e-6);

  const FashionMNIST raw(dir.str(), /*train=*/true, /*normalize=*/false, /*flatten=*/false);
  EXPECT_EQ(raw.inputs().shape(), (Shape{4, 1, 28, 28}));
  const auto r = raw.inputs().to_vector<float>();
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_EQ(r[255], 1.0f);
  EXPECT_EQ(r[784 + 10], 17.0f / 255.0f);

  const Example e = ds.get(3);
  EXPECT_EQ(e.input.shape(), (Shape{784}));
  EXPECT_EQ(e.target.item(), 3.0);
}

TEST(DataFashionMNIST, ClassNames) {
  const auto& c = FashionMNIST::classes();
  EXPECT_EQ(c[0], "T-shirt/top");
  EXPECT_EQ(c[9], "Ankle boot");
  EXPECT_EQ(c.size(), 10u);
}

TEST(DataFashionMNIST, RootComesFromEnvironmentThenSystemPath) {
  TempDir dir;
  write_fixture_set(dir);
  {
    ScopedEnv env("MANTISSA_DATA_DIR", dir.str());
    EXPECT_EQ(FashionMNIST::default_root(), dir.str());
    const FashionMNIST ds;
    EXPECT_EQ(ds.root(), dir.str());
    EXPECT_EQ(ds.size(), 4);
  }
  {
    // A stale MANTISSA_DATA_DIR is named as the cause, not a missing package.
    TempDir empty;
    ScopedEnv env("MANTISSA_DATA_DIR", empty.str());
    expect_error_with([&] { FashionMNIST ds; },
                      {"the directory MANTISSA_DATA_DIR names", empty.str(),
                       "correct or unset MANTISSA_DATA_DIR"});
  }
  ScopedEnv empty_env("MANTISSA_DATA_DIR", "");
  EXPECT_EQ(FashionMNIST::default_root(), "/usr/share/datasets/fashion-mnist");
}

TEST(DataFashionMNIST, MissingOrBadFilesAreErrors) {
  TempDir dir;
  // Nothing there yet: the error names the expected file and the package.
  expect_error_with([&] { FashionMNIST ds(dir.str()); },
                    {dir.file("train-images-idx3-ubyte.gz"), "dataset-fashion-mnist"});
  expect_error_with([&] { FashionMNIST ds(dir.str(), /*train=*/false); },
                    {"t10k-images-idx3-ubyte.gz"});
  write_fixture_set(dir, label_data(3));  // 4 images, 3 labels
  expect_error_with([&] { FashionMNIST ds(dir.str()); }, {"3 labels for the 4 images"});
  write_fixture_set(dir, {0, 1, 12, 3});
  expect_error_with([&] { FashionMNIST ds(dir.str()); }, {"label 12 of example 2"});
}

// The real data set, when `dataset-fashion-mnist` is installed.
TEST(DataFashionMNIST, RealDataSmokeTest) {
  const std::string root(FashionMNIST::kSystemRoot);
  if (!std::filesystem::exists(root + "/train-images-idx3-ubyte.gz") ||
      !std::filesystem::exists(root + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";

  const FashionMNIST train(root);
  ASSERT_EQ(train.size(), 60000);
  EXPECT_EQ(train.inputs().shape(), (Shape{60000, 784}));
  EXPECT_EQ(train.targets().to_vector<int64_t>()[0], 9);
  EXPECT_EQ(FashionMNIST::classes()[9], "Ankle boot");

  // Normalised with the training statistics: mean ~0, std ~1. Reading the raw statistics
  // back out checks the constants: mean 0.2860406, std 0.3530242.
  const float* x = train.inputs().data<float>();
  const int64_t n = train.inputs().numel();
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sum_sq += static_cast<double>(x[i]) * x[i];
  }
  const double mean = sum / n;
  const double std = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std, 1.0, 1e-3);
  EXPECT_NEAR(mean * FashionMNIST::kStd + FashionMNIST::kMean, 0.2860406, 1e-6);
  EXPECT_NEAR(std * FashionMNIST::kStd, 0.3530242, 1e-6);

  // Balanced classes: 6000 of each.
  std::vector<int64_t> counts(10, 0);
  for (int64_t y : train.targets().to_vector<int64_t>()) ++counts.at(y);
  EXPECT_EQ(counts, std::vector<int64_t>(10, 6000));

  const FashionMNIST test(root, /*train=*/false);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.targets().to_vector<int64_t>()[0], 9);
}

}  // namespace
}  // namespace mantissa::data
