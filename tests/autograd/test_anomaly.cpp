// Anomaly detection in the library: the first forward op that makes a NaN/inf is named with
// its inputs and layer, a non-finite gradient is named in backward, and with the switch off
// nothing is checked or recorded.
#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// fc1 (3 -> 4), ReLU, head (4 -> 2); fc1 all ones so its outputs are positive for a positive x.
class Net : public nn::Module {
 public:
  Net() : nn::Module("Net") {
    register_module("fc1", std::make_shared<nn::Linear>(3, 4));
    register_module("head", std::make_shared<nn::Linear>(4, 2));
    child("fc1")->named_parameters()[0].second.detach().fill_(1.0);
  }
  Tensor forward(const Tensor& x) override {
    return child("head")->forward(relu(child("fc1")->forward(x)));
  }
  Tensor param(const std::string& name) {
    for (auto& [n, p] : named_parameters())
      if (n == name) return p;
    return Tensor();
  }
};

Tensor positive_batch() { return full({1, 3}, 2.0); }

TEST(AnomalyMode, OffByDefaultAndGuardRestores) {
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  {
    autograd::detect_anomaly outer;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    {
      autograd::detect_anomaly inner;
      EXPECT_TRUE(autograd::is_anomaly_enabled());
    }
    EXPECT_TRUE(autograd::is_anomaly_enabled());
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(true);
  EXPECT_TRUE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(false);
  EXPECT_FALSE(autograd::is_anomaly_enabled());
}

TEST(AnomalyMode, ForwardInfIsNamedWithOpInputsAndLayer) {
  Net net;
  net.param("head.weight").detach().fill_(3e38);  // finite, but 4 products overflow float32
  autograd::detect_anomaly guard(net.named_parameters());
  const std::string msg = error_of([&] { net.forward(positive_batch()); });
  ASSERT_FALSE(msg.empty()) << "no error for an overflowing forward";
  for (const char* piece : {"forward op 'linear'", "layer 'head'", "+inf", "float32[1, 4]",
                            "float32[2, 4]", "float32[2]", "this op made the first"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
}

TEST(AnomalyMode, ForwardNaNIsNamedInTheLayerItsInputCameFrom) {
  Net net;
  autograd::detect_anomaly guard(net.named_parameters());
  // log of a negative value: the op after fc1 (no parameter of its own) reports fc1's layer.
  const std::string msg =
      error_of([&] { log(sub(net.child("fc1")->forward(positive_batch()), 100.0)); });
  for (const char* piece : {"forward op 'log'", "NaN", "layer 'fc1'", "float32[1, 4]"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
}

TEST(AnomalyMode, NonFiniteInputFromOutsideTheGraphIsSaidSo) {
  Net net;
  autograd::detect_anomaly guard(net.named_parameters());
  Tensor x = positive_batch();
  x.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  const std::string msg = error_of([&] { net.forward(x); });
  for (const char* piece : {"layer 'fc1'", "input #0 already held 1 NaN", "check the batch"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
}

// Under fp16 autocast the linear takes autocast's float16 copies of its weights; the copies
// carry their parameters' layer, so an overflow in the head is the head's (not the layer its
// input came from), both with the parameter and with the cast cache.
TEST(AnomalyMode, AutocastCopiesOfWeightsKeepTheirLayer) {
  for (bool cache : {true, false}) {
    Net net;
    net.param("head.weight").detach().fill_(1e4);  // fits float16; 4 x 1e4 x ~6 does not
    autograd::detect_anomaly guard(net.named_parameters());
    amp::autocast ac(DeviceType::kCPU, kFloat16, true, cache);
    const std::string msg = error_of([&] { net.forward(positive_batch()); });
    for (const char* piece :
         {"forward op 'linear'", "layer 'head'", "float16[2, 4]", "this op made the first"})
      EXPECT_NE(msg.find(piece), std::string::npos)
          << "cache " << cache << ": " << msg << "\nlacks: " << piece;
  }
}

// A weight beyond float16's range becomes inf in its autocast copy: the cast itself is
// reported, with the parameter's layer, instead of a later op or the batch.
TEST(AnomalyMode, AWeightThatOverflowsItsCastCopyIsSaidSo) {
  Net net;
  net.param("head.weight").detach().fill_(1e5);  // float16's max is 65504
  autograd::detect_anomaly guard(net.named_parameters());
  amp::autocast ac(DeviceType::kCPU, kFloat16);
  const std::string msg = error_of([&] { net.forward(positive_batch()); });
  for (const char* piece : {"autocast's float16 copy of a float32 parameter", "layer 'head'",
                            "+inf", "exceed float16's range"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
}

TEST(AnomalyMode, WhereMayPlaceInfinities) {
  autograd::detect_anomaly guard;
  Tensor x = ones({4});
  x.requires_grad_();
  Tensor masked = where(gt(x, 2.0), x, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isinf(masked.to_vector<double>()[0]));
}

TEST(AnomalyMode, BackwardNonFiniteGradientIsNamed) {
  Net net;
  net.param("fc1.weight").detach().fill_(0.0);
  net.param("fc1.bias").detach().fill_(0.0);
  autograd::detect_anomaly guard(net.named_parameters());
  // sqrt(0) is a finite 0; its gradient 1 / (2 sqrt(0)) is not.
  Tensor loss = sum(sqrt(relu(net.child("fc1")->forward(positive_batch()))));
  EXPECT_EQ(loss.item(), 0.0);
  const std::string msg = error_of([&] { loss.backward(); });
  for (const char* piece : {"backward of op 'sqrt'", "SqrtBackward", "layer 'fc1'", "+inf",
                            "gradient of input #0 (float32[1, 4])"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
}

TEST(AnomalyMode, TolerateBackwardAnomaliesRemembersTheFirst) {
  autograd::detect_anomaly guard;
  Tensor x = zeros({2});
  x.requires_grad_();
  Tensor loss = sum(sqrt(x));
  autograd::TolerateBackwardAnomalies tolerate;
  loss.backward();
  EXPECT_NE(tolerate.first_report().find("backward of op 'sqrt'"), std::string::npos)
      << tolerate.first_report();
  EXPECT_TRUE(std::isinf(x.grad().to_vector<double>()[0]));
}

// Off: the same NaN forward and inf backward run to the end, and no node carries anomaly
// bookkeeping (no layer, no sequence number).
TEST(AnomalyMode, OffCostsNothingObservable) {
  ASSERT_FALSE(autograd::is_anomaly_enabled());
  Net net;
  Tensor y = log(sub(net.child("fc1")->forward(positive_batch()), 100.0));
  EXPECT_TRUE(std::isnan(y.to_vector<double>()[0]));
  ASSERT_NE(y.impl().grad_fn, nullptr);
  EXPECT_TRUE(y.impl().grad_fn->layer.empty());
  EXPECT_EQ(y.impl().grad_fn->sequence, 0u);
  Tensor x = zeros({2});
  x.requires_grad_();
  sum(sqrt(x)).backward();
  EXPECT_TRUE(std::isinf(x.grad().to_vector<double>()[0]));
}

}  // namespace
}  // namespace mantissa
