// Companion of scripts/safetensors_interop.py: writes a safetensors file with known values, or
// prints every tensor of a file as JSON (name, dtype, shape, values as doubles) so the script
// can compare what mantissa reads with what Python wrote.
//   build/example_safetensors_check write out.safetensors
//   build/example_safetensors_check read  in.safetensors
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "mantissa/core/tensor.h"
#include "mantissa/io/safetensors.h"

using namespace mantissa;

namespace {

// value i of every tensor: (i - 3) * 0.75, exact in every float dtype used here.
Tensor ramp(const Shape& shape, DType dtype) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<double>(i) - 3) * 0.75;
  return tensor_of(v, shape, dtype);
}

int write(const std::string& path) {
  io::NamedTensors t = {
      {"f64", ramp({2, 3}, kFloat64)},
      {"f32", ramp({3, 2}, kFloat32)},
      {"f16", ramp({4}, kFloat16)},
      {"bf16", ramp({2, 2}, kBFloat16)},
      {"i64", tensor_of({-5, 0, 7}, {3}, kInt64)},
      {"i32", tensor_of({1, -2}, {2}, kInt32)},
      {"i8", tensor_of({-128, 127}, {2}, kInt8)},
      {"u8", tensor_of({0, 255}, {2}, kUInt8)},
      {"bool", tensor_of({1, 0, 1}, {3}, kBool)},
      {"scalar", scalar_tensor(2.5, kFloat32)},
      {"empty", empty({0, 3}, kFloat32)},
  };
  io::save_safetensors(path, t, {{"written_by", "mantissa"}});
  return 0;
}

int read(const std::string& path) {
  const io::SafetensorsFile f = io::load_safetensors(path);
  nlohmann::json out;
  out["metadata"] = f.metadata;
  for (const auto& [name, t] : f.tensors) {
    nlohmann::json v = nlohmann::json::array();
    for (double x : t.to_vector<double>())
      v.push_back(std::isnan(x) ? nlohmann::json("nan") : nlohmann::json(x));
    out["tensors"][name] = {{"dtype", std::string(io::safetensors_dtype_name(t.dtype()))},
                            {"shape", t.shape()},
                            {"values", v}};
  }
  fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "read") != 0)) {
    fmt::print(stderr, "usage: {} write|read FILE\n", argv[0]);
    return 2;
  }
  try {
    return std::strcmp(argv[1], "write") == 0 ? write(argv[2]) : read(argv[2]);
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
