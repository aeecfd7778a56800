// cuDNN is opened at the first GPU convolution, not linked (kernels/cuda/conv/cudnn_api.h), as
// cuBLAS is (test_cublas_loading.cpp). These checks need no GPU: the library opens, every entry
// point conv2d calls is found (a name spelled wrong, or a cuDNN older than the headers, fails
// here rather than at a user's first GPU convolution), and the descriptors conv2d builds (groups,
// stride, padding, dilation) describe conv2d's own output shape, which also loads cuDNN's
// sub-libraries (descriptors are host-side).
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_cuda.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/ops/conv.h"

namespace mantissa {
namespace {

// conv2d's entry points: the 26 of cudnn_entries.inc.
constexpr int kCudnnEntryPoints = 26;

bool cudnn_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcudnn") != std::string::npos) return true;
  return false;
}

TEST(CudnnLoading, EveryEntryPointIsFoundWithoutAGpu) {
  if (!cuda::is_built()) {
    EXPECT_EQ(kernels::cuda::cudnn_entry_points_found(), 0);
    GTEST_SKIP() << "built without the CUDA backend: no cuDNN to open";
  }
  EXPECT_EQ(kernels::cuda::cudnn_entry_points_found(), kCudnnEntryPoints);
  EXPECT_TRUE(cudnn_mapped());
}

struct Geometry {
  Shape x, w;
  Size2 stride, padding, dilation;
  int64_t groups;
};

TEST(CudnnLoading, DescriptorsDescribeConv2dsOutputWithoutAGpu) {
  if (!cuda::is_built()) GTEST_SKIP() << "built without the CUDA backend: no cuDNN to open";
  const std::vector<Geometry> cases = {
      {{3, 5, 11, 9}, {4, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{3, 5, 11, 9}, {6, 5, 3, 3}, {2, 1}, {0, 2}, {2, 1}, 1},
      {{2, 6, 13, 11}, {8, 3, 3, 3}, {2, 2}, {2, 1}, {2, 2}, 2},
      {{2, 6, 9, 7}, {12, 1, 3, 3}, {2, 1}, {1, 1}, {1, 2}, 6},  // depthwise, multiplier 2
      {{2, 1, 28, 28}, {8, 1, 7, 7}, {7, 7}, {0, 0}, {1, 1}, 1},
  };
  for (const Geometry& c : cases) {
    // conv2d's own shape, from the CPU.
    const Tensor y =
        conv2d(zeros(c.x), zeros(c.w), Tensor(), c.stride, c.padding, c.dilation, c.groups);
    kernels::ConvGeometry g{};
    g.n = c.x[0];
    g.ic = c.x[1];
    g.ih = c.x[2];
    g.iw = c.x[3];
    g.oc = c.w[0];
    g.kh = c.w[2];
    g.kw = c.w[3];
    g.oh = y.size(2);
    g.ow = y.size(3);
    g.sh = c.stride[0];
    g.sw = c.stride[1];
    g.ph = c.padding[0];
    g.pw = c.padding[1];
    g.dh = c.dilation[0];
    g.dw = c.dilation[1];
    g.groups = c.groups;
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " groups " + std::to_string(c.groups) +
                   " " + std::string(dt.name()));
      const std::array<int64_t, 4> dims = kernels::cuda::cudnn_output_dims(g, dt);
      EXPECT_EQ(Shape(dims.begin(), dims.end()), y.shape());
    }
  }
}

// A status other than success is a mantissa::Error naming the op, the shapes, the cuDNN function
// and cuDNN's text for the status (a dilation of 0, which conv2d itself refuses, makes cuDNN's
// descriptor refuse it too).
TEST(CudnnLoading, AFailedCallIsAnErrorNamingTheShapesAndCudnnsText) {
  if (!cuda::is_built()) GTEST_SKIP() << "built without the CUDA backend: no cuDNN to open";
  kernels::ConvGeometry g{};
  g.n = 2;
  g.ic = 4;
  g.ih = 9;
  g.iw = 7;
  g.oc = 6;
  g.kh = 3;
  g.kw = 3;
  g.oh = 9;
  g.ow = 7;
  g.sh = g.sw = 1;
  g.ph = g.pw = 1;
  g.dh = 0;
  g.dw = 1;
  g.groups = 2;
  try {
    (void)kernels::cuda::cudnn_output_dims(g, kFloat32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[conv2d]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input [2, 4, 9, 7] and weight [6, 2, 3, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("groups=2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cudnnSetConvolution2dDescriptor returned CUDNN_STATUS_BAD_PARAM"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace mantissa
