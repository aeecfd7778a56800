// The distributed pieces that run in one process: post-accumulate-grad hooks, the world-size-1
// communicator and reducer, strategy selection and its errors. The multi-rank behaviour is
// tested under mpirun (tests/mpi/, CTest mpi.*).
#include <gtest/gtest.h>

#include "mantissa/autograd/grad_hooks.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/dist/ddp.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/strategy.h"

using namespace mantissa;

TEST(GradHooks, RunOncePerBackwardAfterTheGradientIsAccumulated) {
  Tensor w = ones({3}).requires_grad_();
  std::vector<float> seen;
  int calls = 0;
  {
    autograd::GradHookHandle h =
        autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
          ++calls;
          seen = leaf.grad().to_vector<float>();
        });
    // w used twice: the engine sums both gradients before accumulating, one hook call.
    Tensor y = sum(add(mul(w, 2.0), mul(w, 3.0)));
    y.backward();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(seen, (std::vector<float>{5, 5, 5}));
    sum(w).backward();  // accumulates: the hook sees the total
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(seen, (std::vector<float>{6, 6, 6}));
  }
  sum(w).backward();  // the handle went out of scope: removed
  EXPECT_EQ(calls, 2);
}

TEST(GradHooks, OnlyOnLeavesThatRequireGrad) {
  Tensor a = ones({2});
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(a, [](const Tensor&) {}), Error);
  Tensor b = ones({2}).requires_grad_();
  Tensor c = mul(b, 2.0);
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(c, [](const Tensor&) {}), Error);
}

TEST(SingleProcessCommunicator, CollectivesLeaveDataAlone) {
  dist::SingleProcessCommunicator c;
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_TRUE(c.is_global_zero());
  Tensor t = full({3}, 2.5);
  c.all_reduce(t, dist::ReduceOp::kSum);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(c.all_reduce(4.0, dist::ReduceOp::kMax), 4.0);
  EXPECT_EQ(c.broadcast(std::string("abc"), 0), "abc");
  float x = 1;
  auto w = c.all_reduce_async(&x, 1, kFloat32, dist::ReduceOp::kSum);
  EXPECT_TRUE(w->test());
}

TEST(DistributedDataParallel, BucketsInReverseOrderUnderTheCap) {
  auto comm = std::make_shared<dist::SingleProcessCommunicator>();
  dist::NamedTensors params = {{"a", zeros({256}).requires_grad_()},  // 1 KiB
                               {"b", zeros({256}).requires_grad_()},
                               {"c", zeros({512}).requires_grad_()},  // 2 KiB
                               {"frozen", zeros({4})}};
  dist::DistributedDataParallel ddp(params, comm, {.bucket_cap_bytes = 2048});
  // c alone fills a bucket; a and b share the next (reverse registration order).
  EXPECT_EQ(ddp.bucket_bytes(), (std::vector<int64_t>{2048, 2048}));
}

TEST(DistributedDataParallel, WorldOfOneLeavesGradientsAsBackwardMadeThem) {
  auto comm = std::make_shared<dist::SingleProcessCommunicator>();
  Tensor w = full({4}, 1.5).requires_grad_();
  dist::DistributedDataParallel ddp({{"w", w}}, comm);
  ddp.prepare_for_backward(true);
  sum(mul(w, w)).backward();
  ddp.finish_backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(DistributedDataParallel, GradientsAreReducedInFloat32OrBfloat16Only) {
  auto comm = std::make_shared<dist::SingleProcessCommunicator>();
  Tensor w = full({4}, 1.5).requires_grad_();
  EXPECT_NO_THROW(dist::DistributedDataParallel({{"w", w}}, comm, {.reduce_dtype = kBFloat16}));
  try {
    dist::DistributedDataParallel ddp({{"w", w}}, comm, {.reduce_dtype = kFloat16});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduced in float32 or bfloat16, not float16"),
              std::string::npos)
        << e.what();
  }
  try {
    train::make_strategy({.ddp = {.reduce_dtype = kFloat64}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("--grad-reduce-dtype) is float32 or bfloat16, got float64"),
        std::string::npos)
        << e.what();
  }
  // One process: the bfloat16 reduce-scatter of a world of one returns its input's bytes.
  dist::SingleProcessCommunicator c;
  const uint16_t in[3] = {0x3f80, 0x4000, 0xc040};
  uint16_t out[3] = {};
  c.reduce_scatter(in, out, {3}, kBFloat16);
  EXPECT_EQ(std::vector<uint16_t>(out, out + 3), std::vector<uint16_t>(in, in + 3));
}

// Lightning's layer sync has no effect on one device, so a script with sync_batchnorm runs on
// one process as on several: a note, not an error, and the plain single-device strategy.
TEST(Strategy, SyncBatchnormOnOneProcessIsANoteNotAnError) {
  if (dist::launched_by_mpi() && dist::launcher_world_size() > 1)
    GTEST_SKIP() << "several ranks here: auto picks ddp";
  forget_warnings_said_once();
  WarningRecorder recorder;
  std::shared_ptr<train::Strategy> s;
  ASSERT_NO_THROW(s = train::make_strategy({.sync_batchnorm = true}));
  EXPECT_EQ(s->name(), "single_device");
  EXPECT_EQ(s->world_size(), 1);
  ASSERT_EQ(recorder.messages().size(), 1u);
  EXPECT_NE(recorder.messages()[0].find("sync_batchnorm has no effect on one process"),
            std::string::npos)
      << recorder.messages()[0];
}

TEST(Strategy, SingleDeviceByDefaultAndClearErrors) {
  auto s = train::make_strategy({});
  EXPECT_EQ(s->name(), "single_device");
  EXPECT_EQ(s->world_size(), 1);
  EXPECT_THROW(train::make_strategy({.strategy = "deepspeed"}), Error);
  EXPECT_THROW(train::make_strategy({.devices = 0}), Error);
  if (!dist::launched_by_mpi()) {
    // devices = 2 outside an MPI job: says how to start one (or how to install MPI).
    try {
      train::make_strategy({.devices = 2});
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("mpirun -np 2") != std::string::npos ||
                  what.find("libopenmpi-dev") != std::string::npos)
          << what;
    }
  }
}
