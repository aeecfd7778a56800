// The byte form predict's outputs take between ddp ranks (src/train/tensor_list_bytes.h): every
// dtype, shape and undefined slot comes back as it went, and bytes that are not such a list
// are refused before anything is allocated.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "train/tensor_list_bytes.h"

using namespace mantissa;
using train::detail::tensor_list_from_bytes;
using train::detail::tensor_list_to_bytes;

namespace {
std::string int64_bytes(std::initializer_list<int64_t> values) {
  std::string s;
  for (int64_t v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}
}  // namespace

TEST(TensorListBytes, EveryDtypeShapeAndEmptySlotRoundTrips) {
  const Tensor f = arange(0, 6, 1, kFloat32).reshape({2, 3});
  const Tensor strided = f.t();  // not contiguous: sent in its logical order
  const Tensor bf = full({4}, -1.5, kBFloat16);
  const Tensor ids = arange(5, 8, 1, kInt64);
  const Tensor scalar = full({}, 7.0, kFloat64);
  const Tensor none_left = zeros({0, 3});
  const Tensor flags = full({2}, 1.0, kBool);
  const std::vector<Tensor> in = {f, Tensor(), strided, bf, ids, scalar, none_left, flags};
  const std::vector<Tensor> out = tensor_list_from_bytes(tensor_list_to_bytes(in));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i].defined(), in[i].defined()) << i;
    if (!in[i].defined()) continue;
    EXPECT_EQ(out[i].dtype(), in[i].dtype()) << i;
    EXPECT_EQ(out[i].shape(), in[i].shape()) << i;
    const Tensor c = in[i].contiguous();
    ASSERT_EQ(out[i].nbytes(), c.nbytes()) << i;
    EXPECT_EQ(std::memcmp(out[i].data_ptr(), c.data_ptr(), c.nbytes()), 0) << i;
  }
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(tensor_list_from_bytes(tensor_list_to_bytes({})).empty());
}

TEST(TensorListBytes, RefusesTruncatedOrOversizedListsBeforeAllocating) {
  const std::string good = tensor_list_to_bytes({arange(0, 4, 1, kFloat32)});
  EXPECT_THROW(tensor_list_from_bytes(good.substr(0, good.size() - 1)), Error);
  EXPECT_THROW(tensor_list_from_bytes(good + "x"), Error);
  EXPECT_THROW(tensor_list_from_bytes(""), Error);
  // One defined f32 tensor claiming 2^40 x 2^20 elements in a few bytes: refused, not allocated.
  const std::string huge =
      int64_bytes({1, 1, static_cast<int64_t>(DType::Id::f32), 2, int64_t{1} << 40, 1 << 20});
  try {
    tensor_list_from_bytes(huge);
    ADD_FAILURE() << "a 2^60-element claim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the bytes left"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tensor_list_from_bytes(int64_bytes({1, 1, 99, 0})), Error);       // no such dtype
  EXPECT_THROW(tensor_list_from_bytes(int64_bytes({1, 1, 1, 1, -4})), Error);    // negative size
  EXPECT_THROW(tensor_list_from_bytes(int64_bytes({int64_t{1} << 50})), Error);  // count
}
