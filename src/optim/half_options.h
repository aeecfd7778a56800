#pragma once
// The half-precision fields every optimizer's options carry (see HalfPrecisionOptions in
// optimizer.h), read and written the same way by SGD and Adam.
#include <nlohmann/json.hpp>

#include "mantissa/optim/optimizer.h"

namespace mantissa::optim::detail {

template <class Options>
HalfPrecisionOptions half_of(const Options& o) {
  return {o.master_weights, o.stochastic_rounding, o.fp32_state, o.rounding_seed};
}

template <class Options>
void half_to_json(const Options& o, nlohmann::json& j) {
  j["master_weights"] = o.master_weights;
  j["stochastic_rounding"] = o.stochastic_rounding;
  j["fp32_state"] = o.fp32_state;
  j["rounding_seed"] = o.rounding_seed;
}

// master_weights and fp32_state fix the state layout and stay as constructed; the rounding
// mode and seed load like any hyper-parameter (so a resumed run draws the same bits).
template <class Options>
void half_from_json(const nlohmann::json& j, Options& o) {
  o.stochastic_rounding = j.value("stochastic_rounding", o.stochastic_rounding);
  o.rounding_seed = j.value("rounding_seed", o.rounding_seed);
}

}  // namespace mantissa::optim::detail
