// Fashion-MNIST from its IDX files: pixels become float32 through a 256-entry table (scale to
// [0, 1], then standardise), labels become int64.
#include "mantissa/data/fashion_mnist.h"

#include <array>
#include <cstdlib>
#include <filesystem>

#include "mantissa/data/idx.h"

namespace mantissa::data {
namespace {

constexpr const char* kWhere = "FashionMNIST";

// The packaged name is <stem>.gz; a plain <stem> is accepted when the .gz is absent.
std::string find_file(const std::string& root, const std::string& stem) {
  const std::filesystem::path dir(root);
  const auto gz = dir / (stem + ".gz");
  if (std::filesystem::exists(gz)) return gz.string();
  const auto plain = dir / stem;
  if (std::filesystem::exists(plain)) return plain.string();
  return gz.string();  // read_idx reports it missing, with how to install the data
}

}  // namespace

std::string FashionMNIST::default_root() {
  const char* env = std::getenv("MANTISSA_DATA_DIR");
  if (env && *env) return env;
  return std::string(kSystemRoot);
}

const std::array<std::string_view, FashionMNIST::kNumClasses>& FashionMNIST::classes() {
  static const std::array<std::string_view, kNumClasses> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

FashionMNIST::FashionMNIST(const std::string& root, bool train, bool normalize, bool flatten)
    : root_(root.empty() ? default_root() : root), train_(train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_file(root_, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(root_, prefix + "-labels-idx1-ubyte");
  if (root.empty() && root_ != kSystemRoot && !std::filesystem::exists(image_path)) {
    // The root came from MANTISSA_DATA_DIR, which overrides the installed copy: a stale value
    // would otherwise read as "not installed" on a machine that has the package.
    fail(kWhere,
         "no Fashion-MNIST in '{}', the directory MANTISSA_DATA_DIR names (it overrides the "
         "installed {}): correct or unset MANTISSA_DATA_DIR, or pass --data-dir",
         root_, kSystemRoot);
  }
  const Tensor pixels = read_idx_images(image_path);
  const Tensor raw_labels = read_idx_labels(label_path);

  const int64_t n = pixels.size(0);
  MANTISSA_CHECK(pixels.size(1) == kImageSize && pixels.size(2) == kImageSize, kWhere,
                 "'{}' holds images of {}x{}, Fashion-MNIST's are 28x28", image_path,
                 pixels.size(1), pixels.size(2));
  MANTISSA_CHECK(raw_labels.size(0) == n, kWhere, "'{}' has {} labels for the {} images of '{}'",
                 label_path, raw_labels.size(0), n, image_path);

  std::array<float, 256> table;
  for (int v = 0; v < 256; ++v) {
    const float x = static_cast<float>(v) / 255.0f;
    table[v] = normalize ? (x - kMean) / kStd : x;
  }
  const int64_t pixels_per_image = kImageSize * kImageSize;
  Tensor images = flatten ? empty({n, pixels_per_image}, kFloat32)
                          : empty({n, 1, kImageSize, kImageSize}, kFloat32);
  const uint8_t* src = pixels.data<uint8_t>();
  float* dst = images.data<float>();
  const int64_t total = n * pixels_per_image;
#pragma omp parallel for if (total > (int64_t{1} << 16)) schedule(static)
  for (int64_t i = 0; i < total; ++i) dst[i] = table[src[i]];

  Tensor labels = empty({n}, kInt64);
  const uint8_t* lsrc = raw_labels.data<uint8_t>();
  int64_t* ldst = labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    MANTISSA_CHECK(lsrc[i] < kNumClasses, kWhere, "'{}': label {} of example {} is not a class 0-9",
                   label_path, lsrc[i], i);
    ldst[i] = lsrc[i];
  }
  set_tensors(std::move(images), std::move(labels));
}

}  // namespace mantissa::data
