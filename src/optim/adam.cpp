// Adam and AdamW: one fused pass per parameter. Each term mirrors torch.optim's
// non-capturable single-tensor update in the same order, with the scalars computed in double
// (as Python does) and converted once to the arithmetic type, so f32/f64 results agree with
// PyTorch to rounding. f16/bf16 parameters compute in fp32; their moments are stored in the
// parameter's dtype (as torch does) or fp32, see HalfPrecision and fused_loop.h.
#include "mantissa/optim/adam.h"

#include <cmath>

#include "kernels/cpu/dispatch.h"
#include "optim/fused_loop.h"
#include "optim/half_options.h"
#include "optim/stochastic_round.h"

namespace mantissa::optim {
namespace {

template <typename A>
struct AdamCoeffs {
  A sign;  // -1 with maximize
  A beta1, one_minus_beta1, beta2, one_minus_beta2;
  A neg_step_size;    // -lr / (1 - beta1^step)
  A bias_corr2_sqrt;  // sqrt(1 - beta2^step)
  A eps;
  A weight_decay;  // L2 (Adam): added to the gradient
  A decay_factor;  // decoupled (AdamW): 1 - lr * weight_decay; exactly 1 for Adam
};

// One Adam step on X = A or a pack of A, term by term in torch's order.
template <bool kL2, bool kAmsgrad, typename X, typename A>
inline void adam_math(X& p, X d, X& m, X& v, X& v_max, const AdamCoeffs<A>& c) {
  d = d * c.sign;
  p = p * c.decay_factor;
  if constexpr (kL2) d = d + c.weight_decay * p;
  m = m * c.beta1 + c.one_minus_beta1 * d;
  v = v * c.beta2 + c.one_minus_beta2 * d * d;
  X second = v;
  if constexpr (kAmsgrad) {
    v_max = detail::max_nan(v, v_max);
    second = v_max;
  }
  const X denom = detail::sqrt_of(second) / c.bias_corr2_sqrt + c.eps;
  // torch's addcdiv computes self + (value * t1) / t2.
  p = p + c.neg_step_size * m / denom;
}

template <typename T, bool kL2, bool kAmsgrad>
void adam_update(const detail::UpdateIo<T>& io, int64_t n, const AdamCoeffs<kernels::acc_t<T>>& c) {
  using A = kernels::acc_t<T>;
  using V = typename detail::Pack<A>::type;
  detail::parallel_ranges(n, [&](int64_t begin, int64_t end) {
    detail::for_blocks(io, begin, end, [&](A* pa, const A* ga, A* const* s, int64_t count) {
      A* mo = s[0];
      A* vo = s[1];
      A* xo = kAmsgrad ? s[2] : nullptr;
      auto pack = [&](int64_t i) {
        V pv = detail::load_pack<V>(pa + i), mv = detail::load_pack<V>(mo + i);
        V vv = detail::load_pack<V>(vo + i), xv{};
        if constexpr (kAmsgrad) xv = detail::load_pack<V>(xo + i);
        adam_math<kL2, kAmsgrad>(pv, detail::load_pack<V>(ga + i), mv, vv, xv, c);
        detail::store_pack(pa + i, pv);
        detail::store_pack(mo + i, mv);
        detail::store_pack(vo + i, vv);
        if constexpr (kAmsgrad) detail::store_pack(xo + i, xv);
      };
      auto elem = [&](int64_t i) {
        A xv = kAmsgrad ? xo[i] : A(0);
        adam_math<kL2, kAmsgrad>(pa[i], ga[i], mo[i], vo[i], xv, c);
        if constexpr (kAmsgrad) xo[i] = xv;
      };
      detail::pack_loop<A>(count, pack, elem);
    });
  });
}

Tensor& buffer(ParamState& st, const char* name, const Tensor& like, DType dtype) {
  auto it = st.buffers.find(name);
  if (it == st.buffers.end()) it = st.buffers.emplace(name, zeros(like.shape(), dtype)).first;
  return it->second;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps,
           double weight_decay, bool amsgrad, bool maximize)
    : Adam(std::move(params), AdamOptions{lr, betas, eps, weight_decay, amsgrad, maximize},
           /*decoupled=*/false) {}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::move(params), options, /*decoupled=*/false) {}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled)
    : decoupled_(decoupled), defaults_(options) {
  validate(options);
  add_param_group(std::move(params), options);
}

void Adam::validate(const AdamOptions& o) const {
  const char* where = decoupled_ ? "AdamW" : "Adam";
  check_hyper(o.lr >= 0, where, "learning rate", o.lr);
  check_hyper(o.eps >= 0, where, "epsilon value", o.eps);
  check_hyper(o.betas.first >= 0 && o.betas.first < 1, where, "beta parameter at index 0",
              o.betas.first);
  check_hyper(o.betas.second >= 0 && o.betas.second < 1, where, "beta parameter at index 1",
              o.betas.second);
  check_hyper(o.weight_decay >= 0, where, "weight_decay value", o.weight_decay);
  check_half_precision(detail::half_of(o), where);
}

void Adam::add_param_group(std::vector<Tensor> params) {
  add_param_group(std::move(params), defaults_);
}

void Adam::add_param_group(std::vector<Tensor> params, const AdamOptions& options) {
  validate(options);
  add_params(std::move(params));
  options_.push_back(options);
  init_half_state(options_.size() - 1);
}

HalfPrecision Adam::half_precision(size_t group) const { return detail::half_of(options(group)); }

const AdamOptions& Adam::options(size_t group) const {
  MANTISSA_CHECK(group < options_.size(), std::string(name()).c_str(),
                 "param group {} out of range ({} groups)", group, options_.size());
  return options_[group];
}

void Adam::set_lr(size_t group, double lr) {
  options(group);
  check_hyper(lr >= 0, std::string(name()).c_str(), "learning rate", lr);
  options_[group].lr = lr;
}

void Adam::step() {
  const std::string where(name());
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const AdamOptions& o = options_[gi];
    const auto& ps = params(gi);
    for (size_t i = 0; i < ps.size(); ++i) {
      const Tensor& p = ps[i];
      const Tensor g = grad_for_update(p, where.c_str());
      if (!g.defined()) continue;
      ParamState& st = state_at(gi, i);
      const DType sd = state_dtype(gi, p);
      std::vector<Tensor> states = {buffer(st, "exp_avg", p, sd), buffer(st, "exp_avg_sq", p, sd)};
      if (o.amsgrad) states.push_back(buffer(st, "max_exp_avg_sq", p, sd));
      st.step += 1;
      const uint64_t key = sr_key(o.rounding_seed, static_cast<uint64_t>(param_index(gi, i)),
                                  static_cast<uint64_t>(st.step));

      // Python-side scalars (double), exactly as torch computes them.
      const double step = static_cast<double>(st.step);
      const double bias_correction1 = 1 - std::pow(o.betas.first, step);
      const double bias_correction2 = 1 - std::pow(o.betas.second, step);
      const double step_size = o.lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);

      kernels::dispatch_floating(p.dtype(), where.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = kernels::acc_t<T>;
        AdamCoeffs<A> c{};
        c.sign = o.maximize ? A(-1) : A(1);
        c.beta1 = static_cast<A>(o.betas.first);
        c.one_minus_beta1 = static_cast<A>(1 - o.betas.first);
        c.beta2 = static_cast<A>(o.betas.second);
        c.one_minus_beta2 = static_cast<A>(1 - o.betas.second);
        c.neg_step_size = static_cast<A>(-step_size);
        c.bias_corr2_sqrt = static_cast<A>(bias_correction2_sqrt);
        c.eps = static_cast<A>(o.eps);
        c.weight_decay = static_cast<A>(o.weight_decay);
        c.decay_factor = decoupled_ ? static_cast<A>(1 - o.lr * o.weight_decay) : A(1);
        const auto io = detail::update_io<T>(p, g, states, st, detail::half_of(o), key);
        const bool l2 = !decoupled_ && o.weight_decay != 0;
        const int64_t n = p.numel();
        if (l2 && o.amsgrad)
          adam_update<T, true, true>(io, n, c);
        else if (l2)
          adam_update<T, true, false>(io, n, c);
        else if (o.amsgrad)
          adam_update<T, false, true>(io, n, c);
        else
          adam_update<T, false, false>(io, n, c);
      });
    }
  }
}

nlohmann::json Adam::group_options_json(size_t group) const {
  const AdamOptions& o = options(group);
  nlohmann::json j = {{"lr", o.lr},           {"betas", {o.betas.first, o.betas.second}},
                      {"eps", o.eps},         {"weight_decay", o.weight_decay},
                      {"amsgrad", o.amsgrad}, {"maximize", o.maximize}};
  detail::half_to_json(o, j);
  return j;
}

void Adam::set_group_options_json(size_t group, const nlohmann::json& j) {
  AdamOptions o = options(group);
  o.lr = j.value("lr", o.lr);
  if (j.contains("betas")) {
    const auto& b = j.at("betas");
    MANTISSA_CHECK(b.is_array() && b.size() == 2, std::string(name()).c_str(),
                   "\"betas\" must be a list of two numbers, got {}", b.dump());
    o.betas = {b[0].get<double>(), b[1].get<double>()};
  }
  o.eps = j.value("eps", o.eps);
  o.weight_decay = j.value("weight_decay", o.weight_decay);
  o.amsgrad = j.value("amsgrad", o.amsgrad);
  o.maximize = j.value("maximize", o.maximize);
  detail::half_from_json(j, o);
  validate(o);
  options_[group] = o;
}

void Adam::check_loaded_state(size_t group, const ParamState& state) const {
  const std::string where(name());
  for (const auto& [buf, t] : state.buffers)
    MANTISSA_CHECK(
        buf == "exp_avg" || buf == "exp_avg_sq" || buf == "max_exp_avg_sq" || buf == "master_param",
        where.c_str(), "unexpected state buffer '{}'", buf);
  if (state.step == 0) return;
  // A started parameter needs its moments, or the next step would silently restart them.
  std::vector<const char*> needed = {"exp_avg", "exp_avg_sq"};
  if (options(group).amsgrad) needed.push_back("max_exp_avg_sq");
  for (const char* buf : needed)
    MANTISSA_CHECK(state.buffers.count(buf), where.c_str(),
                   "state of a parameter at step {} lacks its '{}' tensor", state.step, buf);
}

}  // namespace mantissa::optim
