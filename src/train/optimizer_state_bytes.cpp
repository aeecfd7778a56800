// optimizer_state_to_bytes: the meta JSON's length, the meta (with the tensor names), the
// tensors (tensor_list_bytes.h).
#include "train/optimizer_state_bytes.h"

#include <cstring>
#include <vector>

#include "mantissa/core/error.h"
#include "train/tensor_list_bytes.h"

namespace mantissa::train::detail {

std::string optimizer_state_to_bytes(const optim::OptimizerState& state) {
  nlohmann::json meta = state.meta;
  std::vector<Tensor> tensors;
  meta["tensor_names"] = nlohmann::json::array();
  for (const auto& [key, t] : state.tensors) {
    meta["tensor_names"].push_back(key);
    tensors.push_back(t);
  }
  const std::string text = meta.dump();
  const uint64_t length = text.size();
  std::string bytes(sizeof length, '\0');
  std::memcpy(bytes.data(), &length, sizeof length);
  return bytes + text + tensor_list_to_bytes(tensors);
}

optim::OptimizerState optimizer_state_from_bytes(const std::string& bytes) {
  const char* where = "zero";
  uint64_t length = 0;
  MANTISSA_CHECK(bytes.size() >= sizeof length, where, "truncated optimizer state shard");
  std::memcpy(&length, bytes.data(), sizeof length);
  MANTISSA_CHECK(length <= bytes.size() - sizeof length, where, "truncated optimizer state shard");
  optim::OptimizerState state;
  state.meta = nlohmann::json::parse(bytes.substr(sizeof length, length));
  const std::vector<Tensor> tensors =
      tensor_list_from_bytes(std::string_view(bytes).substr(sizeof length + length));
  const nlohmann::json names = state.meta["tensor_names"];
  state.meta.erase("tensor_names");
  MANTISSA_CHECK(names.size() == tensors.size(), where,
                 "optimizer state shard has {} names for {} tensors", names.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    state.tensors[names[i].get<std::string>()] = tensors[i];
  return state;
}

}  // namespace mantissa::train::detail
