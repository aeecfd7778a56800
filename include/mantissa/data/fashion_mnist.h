#pragma once
// Fashion-MNIST (Xiao et al. 2017): 60,000 training and 10,000 test images of 28x28 grey
// pixels in 10 classes. Read from the IDX files that Debian's `dataset-fashion-mnist`
// package installs in /usr/share/datasets/fashion-mnist.
#include <array>
#include <string>
#include <string_view>

#include "mantissa/data/dataset.h"

namespace mantissa::data {

class FashionMNIST : public TensorDataset {
 public:
  // Training-set pixel statistics after scaling to [0, 1]. Computed from
  // train-images-idx3-ubyte.gz (47,040,000 pixels): mean 0.2860406, population std 0.3530242.
  static constexpr float kMean = 0.2860f;
  static constexpr float kStd = 0.3530f;
  static constexpr int64_t kImageSize = 28;
  static constexpr int64_t kNumClasses = 10;
  static constexpr int64_t kTrainSize = 60000;  // images in the training set

  // root "" picks default_root(). Images are float32 scaled to [0, 1] and, with normalize,
  // standardised as (x - kMean) / kStd; shape [N, 784], or [N, 1, 28, 28] unless flatten.
  // Labels are int64 [N]. Files may be gzipped (*.gz, as packaged) or plain.
  explicit FashionMNIST(const std::string& root = "", bool train = true, bool normalize = true,
                        bool flatten = true);

  // $MANTISSA_DATA_DIR when set and non-empty, else /usr/share/datasets/fashion-mnist.
  static std::string default_root();
  static constexpr std::string_view kSystemRoot = "/usr/share/datasets/fashion-mnist";
  // "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
  // "Bag", "Ankle boot".
  static const std::array<std::string_view, kNumClasses>& classes();

  const std::string& root() const { return root_; }
  bool train() const { return train_; }

 private:
  std::string root_;
  bool train_;
};

}  // namespace mantissa::data
