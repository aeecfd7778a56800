#pragma once
// A layer's input error, said in the layer's terms: the op's message ("[linear] input of shape
// [16, 31] does not match weight ...") gains the layer that called it ("in Linear(in_features=
// 32, out_features=8, bias=true)"). A C++ caller has no traceback to find which layer of a model
// refused its input; the repr names its sizes. Only plain mantissa::Error is reworded: its
// subclasses (OutOfMemoryError, TrainingDiverged, ...) keep their type and text.
#include <typeinfo>
#include <utility>

#include "mantissa/core/error.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn::detail {

template <typename F>
auto forward_in_layer(const Module& layer, F&& op) -> decltype(op()) {
  try {
    return std::forward<F>(op)();
  } catch (const Error& e) {
    if (typeid(e) != typeid(Error)) throw;
    throw Error(std::string(e.what()) + " (in " + layer.name() + "(" + layer.extra_repr() + "))");
  }
}

}  // namespace mantissa::nn::detail
