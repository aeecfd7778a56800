#include "mantissa/core/dtype.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "mantissa/core/error.h"

namespace mantissa {
namespace {

constexpr std::array<DType, DType::kCount> kAll = {
    kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8_e4m3fn, kFloat8_e5m2, kInt64,
    kInt32,   kUInt8,   kInt8,    kBool,     kComplex64,     kComplex128};

TEST(DTypeTest, ItemsizesAndNames) {
  constexpr std::array<size_t, DType::kCount> sizes = {8, 4, 2, 2, 1, 1, 8, 4, 1, 1, 1, 8, 16};
  constexpr std::array<const char*, DType::kCount> names = {
      "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64",
      "int32",   "uint8",   "int8",    "bool",     "complex64",     "complex128"};
  for (int i = 0; i < DType::kCount; ++i) {
    EXPECT_EQ(kAll[i].itemsize(), sizes[i]) << names[i];
    EXPECT_EQ(kAll[i].name(), names[i]);
    EXPECT_EQ(to_string(kAll[i]), names[i]);
    EXPECT_EQ(dtype_from_string(names[i]), kAll[i]);
  }
  EXPECT_EQ(kDefaultFloat, kFloat32);
  EXPECT_EQ(DType(), kFloat32);
}

TEST(DTypeTest, Categories) {
  for (int i = 0; i < DType::kCount; ++i) {
    const DType d = kAll[i];
    EXPECT_EQ(d.is_floating_point(), i <= 5) << d.name();
    EXPECT_EQ(d.is_float8(), d == kFloat8_e4m3fn || d == kFloat8_e5m2) << d.name();
    EXPECT_EQ(d.is_reduced_float(), i >= 2 && i <= 5) << d.name();
    EXPECT_EQ(d.is_integral(), i >= 6 && i <= 9) << d.name();
    EXPECT_EQ(d.is_integral(true), i >= 6 && i <= 10) << d.name();
    EXPECT_EQ(d.is_complex(), i >= 11) << d.name();
    EXPECT_EQ(d.is_bool(), d == kBool) << d.name();
  }
}

TEST(DTypeTest, FromStringAliases) {
  EXPECT_EQ(dtype_from_string("f64"), kFloat64);
  EXPECT_EQ(dtype_from_string("double"), kFloat64);
  EXPECT_EQ(dtype_from_string("f32"), kFloat32);
  EXPECT_EQ(dtype_from_string("float"), kFloat32);
  EXPECT_EQ(dtype_from_string("fp32"), kFloat32);
  EXPECT_EQ(dtype_from_string("f16"), kFloat16);
  EXPECT_EQ(dtype_from_string("half"), kFloat16);
  EXPECT_EQ(dtype_from_string("fp16"), kFloat16);
  EXPECT_EQ(dtype_from_string("bf16"), kBFloat16);
  EXPECT_EQ(dtype_from_string("e4m3"), kFloat8_e4m3fn);
  EXPECT_EQ(dtype_from_string("e5m2"), kFloat8_e5m2);
  EXPECT_EQ(dtype_from_string("long"), kInt64);
  EXPECT_EQ(dtype_from_string("i64"), kInt64);
  EXPECT_EQ(dtype_from_string("int"), kInt32);
  EXPECT_EQ(dtype_from_string("i32"), kInt32);
  EXPECT_EQ(dtype_from_string("u8"), kUInt8);
  EXPECT_EQ(dtype_from_string("i8"), kInt8);
  EXPECT_EQ(dtype_from_string("bool"), kBool);
  EXPECT_EQ(dtype_from_string("BF16"), kBFloat16);
  EXPECT_EQ(dtype_from_string("torch.float16"), kFloat16);
}

TEST(DTypeTest, FromStringErrorListsValidNames) {
  EXPECT_THROW(dtype_from_string(""), Error);
  EXPECT_THROW(dtype_from_string("int16"), Error);
  try {
    dtype_from_string("float42");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("float42"), std::string::npos) << msg;
    for (DType d : kAll) EXPECT_NE(msg.find(d.name()), std::string::npos) << msg;
  }
}

// Expected promotions for the nine non-fp8 dtypes, written out by hand from PyTorch's table
// (u8 + i8 is int16 there; we have no int16 and use int32).
TEST(DTypeTest, PromotionTable) {
  constexpr std::array<DType, 9> ts = {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64,
                                       kInt32,   kUInt8,   kInt8,    kBool};
  const DType f8 = kFloat64, f4 = kFloat32, f2 = kFloat16, bf = kBFloat16, i8 = kInt64, i4 = kInt32,
              u1 = kUInt8, i1 = kInt8, b1 = kBool;
  const DType expected[9][9] = {
      /* f64  */ {f8, f8, f8, f8, f8, f8, f8, f8, f8},
      /* f32  */ {f8, f4, f4, f4, f4, f4, f4, f4, f4},
      /* f16  */ {f8, f4, f2, f4, f2, f2, f2, f2, f2},
      /* bf16 */ {f8, f4, f4, bf, bf, bf, bf, bf, bf},
      /* i64  */ {f8, f4, f2, bf, i8, i8, i8, i8, i8},
      /* i32  */ {f8, f4, f2, bf, i8, i4, i4, i4, i4},
      /* u8   */ {f8, f4, f2, bf, i8, i4, u1, i4, u1},
      /* i8   */ {f8, f4, f2, bf, i8, i4, i4, i1, i1},
      /* bool */ {f8, f4, f2, bf, i8, i4, u1, i1, b1},
  };
  for (int a = 0; a < 9; ++a) {
    for (int b = 0; b < 9; ++b) {
      EXPECT_EQ(promote_types(ts[a], ts[b]), expected[a][b])
          << ts[a].name() << " + " << ts[b].name() << " gave "
          << promote_types(ts[a], ts[b]).name();
    }
  }
}

TEST(DTypeTest, Float8PromotionOnlyWithItself) {
  EXPECT_EQ(promote_types(kFloat8_e4m3fn, kFloat8_e4m3fn), kFloat8_e4m3fn);
  EXPECT_EQ(promote_types(kFloat8_e5m2, kFloat8_e5m2), kFloat8_e5m2);
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (DType other : kAll) {
      if (other == fp8) continue;
      EXPECT_THROW(promote_types(fp8, other), Error) << other.name();
      EXPECT_THROW(promote_types(other, fp8), Error) << other.name();
    }
  }
  try {
    promote_types(kFloat8_e4m3fn, kFloat32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Float8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mantissa
