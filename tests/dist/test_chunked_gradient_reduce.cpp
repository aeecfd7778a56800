// zero2's chunked reduce-scatter (src/train/chunked_gradient_reduce.h) on rank 0 of a world of
// 2 whose other rank contributes zeros: armed before backward, every chunk starts from the
// parameters' hooks while backward runs, from the last chunk to the first; each parameter's
// whole gradient is freed once its chunks are packed, so when the first chunk starts at most
// the first layer's gradients are still held; the sums are this rank's part of the flat
// gradients bit for bit, at most two chunks travel at once, and a parameter no gradient reached
// contributes zeros.
#include <gtest/gtest.h>

#include <cstring>

#include "mantissa/mantissa.h"
#include "mantissa/optim/adamw.h"
#include "train/chunked_gradient_reduce.h"
#include "train/optimizer_shard.h"

using namespace mantissa;

namespace {

// Rank 0 of 2: a reduce-scatter's sums are this rank's elements (the other adds zeros). Each
// call records its payload and how many of `watched` hold a gradient at that moment.
class RecordingRankZero final : public dist::Communicator {
 public:
  std::vector<std::vector<float>> payloads;
  std::vector<int> gradients_held;
  std::vector<Tensor> watched;
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "test"; }
  void all_reduce(void*, int64_t, DType, dist::ReduceOp) override {}
  std::unique_ptr<dist::Work> all_reduce_async(void*, int64_t, DType, dist::ReduceOp) override {
    return nullptr;
  }
  void broadcast(void*, int64_t, int) override {}
  void all_gather_bytes(const void*, void*, const std::vector<int64_t>&) override {}
  void reduce_scatter(const void* in, void* out, const std::vector<int64_t>& counts,
                      DType dtype) override {
    EXPECT_EQ(dtype, kFloat32);
    const auto* f = static_cast<const float*>(in);
    payloads.emplace_back(f, f + counts[0] + counts[1]);
    std::memcpy(out, in, static_cast<size_t>(counts[0]) * sizeof(float));
    int held = 0;
    for (const Tensor& p : watched) held += p.grad().defined() ? 1 : 0;
    gradients_held.push_back(held);
  }
  // With `slow`, a started reduce-scatter is done only when waited for (test() says not yet),
  // as a collective still travelling; `outstanding` counts those started and not waited.
  bool slow = false;
  int outstanding = 0, most_outstanding = 0;
  std::unique_ptr<dist::Work> reduce_scatter_async(const void* in, void* out,
                                                   const std::vector<int64_t>& counts,
                                                   DType dtype) override {
    reduce_scatter(in, out, counts, dtype);
    if (!slow) return std::make_unique<Travelling>(nullptr);
    most_outstanding = std::max(most_outstanding, ++outstanding);
    return std::make_unique<Travelling>(&outstanding);
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  struct Travelling final : dist::Work {
    explicit Travelling(int* n) : n_(n) {}  // null: done already
    bool test() override { return n_ == nullptr; }
    void wait() override {
      if (n_ != nullptr) --*n_;
      n_ = nullptr;
    }
    int* n_;
  };
};

std::shared_ptr<nn::Sequential> make_net(uint64_t seed) {
  Generator gen(seed);
  auto net = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i)
    net->push_back(std::make_shared<nn::Linear>(12, 12, true, kFloat32, &gen));
  return net;
}

std::vector<float> flat_gradients(const std::vector<Tensor>& params) {
  std::vector<float> out;
  for (const Tensor& p : params) {
    const Tensor g = p.grad().defined() ? p.grad().contiguous() : zeros(p.shape(), kFloat32);
    out.insert(out.end(), g.data<float>(), g.data<float>() + g.numel());
  }
  return out;
}

// Backward of the sum of squares of `net`'s output on `x`.
void backward_of(nn::Module& net, const Tensor& x) {
  const Tensor out = net.forward(x);
  sum(mul(out, out)).backward();
}

// The flat gradients a plain backward gives make_net(seed) on `x`.
std::vector<float> reference_gradients(uint64_t seed, const Tensor& x) {
  auto ref = make_net(seed);
  backward_of(*ref, x);
  return flat_gradients(ref->parameters());
}

}  // namespace

TEST(ChunkedGradientReduce, ChunksStartDuringBackwardLastFirstAndFreeTheWholeGradients) {
  Generator gen(3);
  const Tensor x = randn({5, 12}, kFloat32, &gen);
  const std::vector<float> ref_flat = reference_gradients(11, x);
  auto net = make_net(11);
  const std::vector<Tensor> params = net->parameters();
  optim::AdamW whole(params, optim::AdamOptions{});
  RecordingRankZero comm;
  comm.watched = params;
  train::detail::OptimizerShard shard(whole, comm);
  const std::vector<int64_t>& cuts = shard.cuts();
  constexpr int64_t kChunk = 40;  // elements; a layer's weight (144) spans several chunks
  train::detail::ChunkedGradientReduce reduce(params, cuts, comm, kChunk * 4, kFloat32);
  reduce.arm_hooks();
  backward_of(*net, x);

  const int64_t total = cuts.back();
  const int64_t chunks = (total + kChunk - 1) / kChunk;
  EXPECT_EQ(reduce.started_in_backward(), chunks);
  ASSERT_EQ(static_cast<int64_t>(comm.payloads.size()), chunks);
  // Last chunk first: call i carries chunk (chunks - 1 - i), the flat gradients' elements.
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t start = (chunks - 1 - i) * kChunk;
    const std::vector<float>& got = comm.payloads[static_cast<size_t>(i)];
    ASSERT_EQ(static_cast<int64_t>(got.size()), std::min(kChunk, total - start)) << i;
    EXPECT_EQ(0, std::memcmp(got.data(), ref_flat.data() + start, got.size() * sizeof(float)))
        << "call " << i;
  }
  // The last chunk (the end of the last weight and the last bias) starts once those two are
  // accumulated, before any other layer's: then the bias, wholly packed, is freed and the
  // weight is held. When the first chunk starts, the later layers' gradients are freed: at
  // most the first layer's two are held; after backward none is.
  EXPECT_EQ(comm.gradients_held.front(), 1);
  EXPECT_LE(comm.gradients_held.back(), 2);
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined());

  const std::vector<float>& sums = reduce.finish();
  ASSERT_EQ(static_cast<int64_t>(sums.size()), cuts[1] - cuts[0]);
  EXPECT_EQ(0, std::memcmp(sums.data(), ref_flat.data(), sums.size() * sizeof(float)));
}

// Collectives that are still travelling when the next chunk is ready: at most two are in flight,
// the third waits for the first, so the packed copies of the gradients never pile up.
TEST(ChunkedGradientReduce, AtMostTwoChunksTravelAtOnce) {
  Generator gen(4);
  const Tensor x = randn({3, 12}, kFloat32, &gen);
  const std::vector<float> ref_flat = reference_gradients(2, x);
  auto net = make_net(2);
  const std::vector<Tensor> params = net->parameters();
  optim::AdamW whole(params, optim::AdamOptions{});
  RecordingRankZero comm;
  comm.slow = true;
  train::detail::OptimizerShard shard(whole, comm);
  train::detail::ChunkedGradientReduce reduce(params, shard.cuts(), comm, 40 * 4, kFloat32);
  reduce.arm_hooks();
  backward_of(*net, x);
  EXPECT_GT(reduce.started_in_backward(), 10);
  EXPECT_EQ(comm.most_outstanding, 2);
  const std::vector<float>& sums = reduce.finish();
  EXPECT_EQ(comm.outstanding, 0);
  EXPECT_EQ(0, std::memcmp(sums.data(), ref_flat.data(), sums.size() * sizeof(float)));
}

TEST(ChunkedGradientReduce, ParameterWithoutGradientAddsZerosAndFinishStartsTheRest) {
  auto net = make_net(5);
  const std::vector<Tensor> params = net->parameters();
  optim::AdamW whole(params, optim::AdamOptions{});
  RecordingRankZero comm;
  train::detail::OptimizerShard shard(whole, comm);
  train::detail::ChunkedGradientReduce reduce(params, shard.cuts(), comm, 1 << 20, kFloat32);
  reduce.arm_hooks();
  // Only the last layer gets a gradient: the one chunk (all parameters) cannot start in
  // backward; finish starts it with zeros for the rest.
  Generator gen(9);
  const Tensor h = randn({2, 12}, kFloat32, &gen);
  sum(net->child_as<nn::Linear>("3")->forward(h)).backward();
  EXPECT_EQ(reduce.started_in_backward(), 0);
  EXPECT_TRUE(comm.payloads.empty());
  const std::vector<float> expected = flat_gradients(params);
  const std::vector<float>& sums = reduce.finish();
  ASSERT_EQ(comm.payloads.size(), 1u);
  EXPECT_EQ(comm.payloads[0], expected);
  ASSERT_EQ(sums.size(), static_cast<size_t>(shard.cuts()[1]));
  EXPECT_EQ(0, std::memcmp(sums.data(), expected.data(), sums.size() * sizeof(float)));
  EXPECT_EQ(expected.front(), 0.0f);  // the first layer got no gradient
}
