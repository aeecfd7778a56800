// SGD: one fused pass per parameter over contiguous memory. The update follows
// torch.optim.SGD term by term (same operation order) so f32/f64 results agree with PyTorch
// to rounding; f16/bf16 parameters compute in fp32 and are rounded once when stored, the
// momentum buffer in the parameter's dtype (as torch) or fp32 (see HalfPrecisionOptions).
#include "mantissa/optim/sgd.h"

#include "core/complex_parts.h"
#include "core/dtype_dispatch.h"
#include "optim/cuda_update.h"
#include "optim/fused_loop.h"
#include "optim/half_options.h"
#include "optim/stochastic_round.h"

namespace mantissa::optim {
namespace {

constexpr const char* kWhere = "SGD";

void validate(const SGDOptions& o) {
  check_hyper(o.lr >= 0, kWhere, "learning rate", o.lr);
  check_hyper(o.momentum >= 0, kWhere, "momentum value", o.momentum);
  check_hyper(o.weight_decay >= 0, kWhere, "weight_decay value", o.weight_decay);
  MANTISSA_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), kWhere,
                 "Nesterov momentum requires a momentum and zero dampening (momentum={}, "
                 "dampening={})",
                 o.momentum, o.dampening);
  check_half_precision(detail::half_of(o), kWhere);
}

// Hyper-parameters converted once to the arithmetic type, as PyTorch converts its scalars.
template <typename A>
struct Coeffs {
  A sign;  // -1 with maximize
  A neg_lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov;
};

// One SGD step on X = A or a pack of A, term by term in torch's order.
template <bool kDecay, bool kMomentum, typename X, typename A>
inline void sgd_math(X& p, X d, X& buf, bool first, const Coeffs<A>& c) {
  d = d * c.sign;
  if constexpr (kDecay) d = d + c.weight_decay * p;
  if constexpr (kMomentum) {
    // The first step starts the buffer at the gradient itself (no dampening).
    buf = first ? d : buf * c.momentum + c.one_minus_dampening * d;
    d = c.nesterov ? d + c.momentum * buf : buf;
  }
  p = p + c.neg_lr * d;
}

template <typename T, bool kDecay, bool kMomentum>
void sgd_update(const detail::UpdateIo<T>& io, bool first, int64_t n,
                const Coeffs<kernels::acc_t<T>>& c) {
  using A = kernels::acc_t<T>;
  using V = typename detail::Pack<A>::type;
  detail::parallel_ranges(n, [&](int64_t begin, int64_t end) {
    detail::for_blocks(io, begin, end, [&](A* pa, const A* ga, A* const* s, int64_t count) {
      A* bo = kMomentum ? s[0] : nullptr;
      auto pack = [&](int64_t i) {
        V pv = detail::load_pack<V>(pa + i), bv{};
        if constexpr (kMomentum) bv = first ? V{} : detail::load_pack<V>(bo + i);
        sgd_math<kDecay, kMomentum>(pv, detail::load_pack<V>(ga + i), bv, first, c);
        detail::store_pack(pa + i, pv);
        if constexpr (kMomentum) detail::store_pack(bo + i, bv);
      };
      auto elem = [&](int64_t i) {
        A bv = kMomentum && !first ? bo[i] : A(0);
        sgd_math<kDecay, kMomentum>(pa[i], ga[i], bv, first, c);
        if constexpr (kMomentum) bo[i] = bv;
      };
      detail::pack_loop<A>(count, pack, elem);
    });
  });
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double dampening,
         double weight_decay, bool nesterov, bool maximize)
    : SGD(std::move(params),
          SGDOptions{lr, momentum, dampening, weight_decay, nesterov, maximize}) {}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : defaults_(options) {
  validate(options);
  add_param_group(std::move(params), options);
}

void SGD::add_param_group(std::vector<Tensor> params) {
  add_param_group(std::move(params), defaults_);
}

void SGD::add_param_group(std::vector<Tensor> params, const SGDOptions& options) {
  validate(options);
  add_params(std::move(params));
  options_.push_back(options);
  init_half_state(options_.size() - 1);
}

HalfPrecisionOptions SGD::half_precision(size_t group) const {
  return detail::half_of(options(group));
}

const SGDOptions& SGD::options(size_t group) const {
  MANTISSA_CHECK(group < options_.size(), kWhere, "param group {} out of range ({} groups)", group,
                 options_.size());
  return options_[group];
}

void SGD::set_lr(size_t group, double lr) {
  options(group);
  check_hyper(lr >= 0, kWhere, "learning rate", lr);
  options_[group].lr = lr;
}

void SGD::step() {
  const std::vector<std::vector<Tensor>> grads = checked_grads(kWhere);
  // GPU parameters are refused before anything changes when they cannot be updated there.
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (size_t i = 0; i < params(gi).size(); ++i)
      if (params(gi)[i].is_cuda() && grads[gi][i].defined())
        detail::check_cuda_param(params(gi)[i], grads[gi][i], detail::half_of(options_[gi]),
                                 kWhere);
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const SGDOptions& o = options_[gi];
    const auto& ps = params(gi);
    for (size_t i = 0; i < ps.size(); ++i) {
      if (!grads[gi][i].defined()) continue;
      // A complex parameter steps as pairs of reals (PyTorch's view_as_real): every SGD
      // update is linear in each part (docs/complex.md).
      const bool cplx = ps[i].dtype().is_complex();
      const Tensor p = cplx ? complex_as_real_view(ps[i]) : ps[i];
      const Tensor g = cplx ? complex_as_real_view(grads[gi][i].contiguous()) : grads[gi][i];
      ParamState& st = state_for_update(gi, i);
      const bool use_momentum = o.momentum != 0;
      bool first = false;
      std::vector<Tensor> states;
      if (use_momentum) {
        first = st.buffers.count("momentum_buffer") == 0;
        // Zeros, not empty: a half buffer is converted to fp32 before the first step writes it.
        states.push_back(
            state_buffer(st, "momentum_buffer", p.shape(), state_dtype(gi, p), p.device()));
      }
      // The step keys the random stream; counted only where it is used, keeping other state
      // dicts as torch's (SGD has no step count there).
      const bool half = p.dtype() == kFloat16 || p.dtype() == kBFloat16;
      if (o.stochastic_rounding && half) st.step += 1;
      const uint64_t key = sr_key(o.rounding_seed, static_cast<uint64_t>(param_index(gi, i)),
                                  static_cast<uint64_t>(st.step));
      if (p.is_cuda()) {
        // One kernel per parameter on its GPU, the same scalars as the CPU coefficients below.
        cuda::detail::SgdUpdate u;
        u.sign = o.maximize ? -1.0 : 1.0;
        u.neg_lr = -o.lr;
        u.momentum = o.momentum;
        u.one_minus_dampening = 1.0 - o.dampening;
        u.weight_decay = o.weight_decay;
        u.decay = o.weight_decay != 0;
        u.first = first;
        u.nesterov = o.nesterov;
        detail::cuda_sgd_update(p, g, use_momentum ? states[0] : Tensor(), st, u, kWhere);
        continue;
      }
      kernels::dispatch_floating(p.dtype(), kWhere, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = kernels::acc_t<T>;
        const Coeffs<A> c{o.maximize ? A(-1) : A(1),      static_cast<A>(-o.lr),
                          static_cast<A>(o.momentum),     static_cast<A>(1.0 - o.dampening),
                          static_cast<A>(o.weight_decay), o.nesterov};
        const auto io = detail::update_io<T>(p, g, states, st, detail::half_of(o), key);
        const int64_t n = p.numel();
        const bool decay = o.weight_decay != 0;
        if (decay && use_momentum)
          sgd_update<T, true, true>(io, first, n, c);
        else if (decay)
          sgd_update<T, true, false>(io, first, n, c);
        else if (use_momentum)
          sgd_update<T, false, true>(io, first, n, c);
        else
          sgd_update<T, false, false>(io, first, n, c);
      });
    }
  }
  count_step();
}

nlohmann::json SGD::group_options_json(size_t group) const {
  const SGDOptions& o = options(group);
  nlohmann::json j = {{"lr", o.lr},
                      {"momentum", o.momentum},
                      {"dampening", o.dampening},
                      {"weight_decay", o.weight_decay},
                      {"nesterov", o.nesterov},
                      {"maximize", o.maximize}};
  detail::half_to_json(o, j);
  return j;
}

void SGD::set_group_options_json(size_t group, const nlohmann::json& j) {
  SGDOptions o = options(group);
  o.lr = j.value("lr", o.lr);
  o.momentum = j.value("momentum", o.momentum);
  o.dampening = j.value("dampening", o.dampening);
  o.weight_decay = j.value("weight_decay", o.weight_decay);
  o.nesterov = j.value("nesterov", o.nesterov);
  o.maximize = j.value("maximize", o.maximize);
  detail::half_from_json(j, o);
  validate(o);
  options_[group] = o;
}

void SGD::check_loaded_state(size_t group, const ParamState& state) const {
  for (const auto& [name, t] : state.buffers)
    MANTISSA_CHECK(name == "momentum_buffer" || name == "master_param", kWhere,
                   "unexpected state buffer '{}'", name);
}

}  // namespace mantissa::optim
