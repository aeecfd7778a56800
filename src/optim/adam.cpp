// Adam and AdamW: one fused pass over all parameters (multi_tensor.h), each element updated by
// the widest SIMD kernel of this CPU (adam_kernels.h). Each term mirrors torch.optim's
// non-capturable single-tensor update in the same order, with the scalars computed in double
// (as Python does) and converted once to the arithmetic type, so f32/f64 results agree with
// PyTorch to rounding. f16/bf16 parameters compute in fp32; their moments are stored in the
// parameter's dtype (as torch does) or fp32, see HalfPrecisionOptions and fused_loop.h.
#include "mantissa/optim/adam.h"

#include <cmath>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kernels/cpu/optim/adam_kernels.h"
#include "mantissa/io/untrusted_json.h"
#include "optim/cuda_update.h"
#include "optim/fused_loop.h"
#include "optim/half_options.h"
#include "optim/multi_tensor.h"
#include "optim/stochastic_round.h"

namespace mantissa::optim {
namespace {

using detail::AdamCoeffs;

// Updates elements [begin, end) of one parameter with the span kernel `span`; f16/bf16
// parameters (and half state) pass through fp32 blocks (fused_loop.h).
// bf16_span: the fused bf16 kernel, where the parameter, gradient and state are all bf16 (no
// master copy, no stochastic rounding); the same bits as the fp32 blocks, in one pass.
template <typename T>
void adam_range(const detail::UpdateIo<T>& io, int64_t begin, int64_t end,
                const AdamCoeffs<kernels::acc_t<T>>& c, detail::AdamSpanFn<kernels::acc_t<T>> span,
                detail::AdamSpanBf16Fn bf16_span) {
  using A = kernels::acc_t<T>;
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (bf16_span && io.half_state && !io.master && !io.stochastic) {
      auto at = [&](int k) { return reinterpret_cast<uint16_t*>(io.state[k]) + begin; };
      bf16_span(c, reinterpret_cast<uint16_t*>(io.param + begin),
                reinterpret_cast<const uint16_t*>(io.grad + begin), at(0), at(1),
                io.num_states > 2 ? at(2) : nullptr, end - begin);
      return;
    }
  }
  detail::for_blocks(io, begin, end, [&](A* pa, const A* ga, A* const* s, int64_t count) {
    span(c, pa, ga, s[0], s[1], io.num_states > 2 ? s[2] : nullptr, count);
  });
}

// The widest span kernel of this CPU for A.
template <typename A>
detail::AdamSpanFn<A> span_kernel(bool l2, bool amsgrad) {
  return detail::adam_span_kernel<A>(simd_level(), l2, amsgrad);
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
  // Optimizer::add_params admits complex parameters for SGD; Adam's update has no complex path
  // (its step() refuses them through the dtype dispatch), so they are refused here, when they
  // are given, with that message, not at the first step after the run was set up.
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined() || !params[i].dtype().is_complex()) continue;
    fail(std::string(name()).c_str(),
         "not supported for complex tensors (dtype {}); see docs/complex.md for the ops that "
         "are (parameter {} of the group; optim::SGD steps complex parameters)",
         params[i].dtype().name(), i);
  }
  add_params(std::move(params));
  options_.push_back(options);
  init_half_state(options_.size() - 1);
}

HalfPrecisionOptions Adam::half_precision(size_t group) const {
  return detail::half_of(options(group));
}

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
  const std::vector<std::vector<Tensor>> grads = checked_grads(where.c_str());
  // GPU parameters are refused before anything changes when they cannot be updated there.
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (size_t i = 0; i < params(gi).size(); ++i)
      if (params(gi)[i].is_cuda() && grads[gi][i].defined())
        detail::check_cuda_param(params(gi)[i], grads[gi][i], detail::half_of(options_[gi]),
                                 where.c_str());
  // Every parameter's update, run afterwards in one parallel pass (multi_tensor.h).
  std::vector<detail::UpdateJob> jobs;
  detail::CudaAdamBatch gpu_updates;  // launched together after the loop
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const AdamOptions& o = options_[gi];
    const auto& ps = params(gi);
    for (size_t i = 0; i < ps.size(); ++i) {
      const Tensor& p = ps[i];
      const Tensor& g = grads[gi][i];
      if (!g.defined()) continue;
      ParamState& st = state_for_update(gi, i);
      const DType sd = state_dtype(gi, p);
      auto buffer = [&](const char* name) -> Tensor& {
        return state_buffer(st, name, p.shape(), sd, p.device());
      };
      std::vector<Tensor> states = {buffer("exp_avg"), buffer("exp_avg_sq")};
      if (o.amsgrad) states.push_back(buffer("max_exp_avg_sq"));
      st.step += 1;
      const uint64_t key = sr_key(o.rounding_seed, static_cast<uint64_t>(param_index(gi, i)),
                                  static_cast<uint64_t>(st.step));

      // Python-side scalars (double), exactly as torch computes them.
      const double step = static_cast<double>(st.step);
      const double bias_correction1 = 1 - std::pow(o.betas.first, step);
      const double bias_correction2 = 1 - std::pow(o.betas.second, step);
      const double step_size = o.lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);

      if (p.is_cuda()) {
        // Queued for a few multi-tensor kernels on its GPU, the same scalars as the CPU
        // coefficients below.
        cuda::detail::AdamUpdate u;
        u.sign = o.maximize ? -1.0 : 1.0;
        u.beta1 = o.betas.first;
        u.one_minus_beta1 = 1 - o.betas.first;
        u.beta2 = o.betas.second;
        u.one_minus_beta2 = 1 - o.betas.second;
        u.neg_step_size = -step_size;
        u.bias_corr2_sqrt = bias_correction2_sqrt;
        u.eps = o.eps;
        u.weight_decay = o.weight_decay;
        u.decay_factor = decoupled_ ? 1 - o.lr * o.weight_decay : 1.0;
        u.l2 = !decoupled_ && o.weight_decay != 0;
        u.amsgrad = o.amsgrad;
        gpu_updates.add(p, g, states, st, u, where.c_str());
        continue;
      }
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
        const auto span = span_kernel<A>(l2, o.amsgrad);
        const auto bf16_span = detail::adam_span_bf16_kernel(simd_level(), l2, o.amsgrad);
        // The job holds the tensors io points into, so they outlive this loop.
        jobs.push_back({[io, c, span, bf16_span, p, g, states](int64_t begin, int64_t end) {
                          adam_range<T>(io, begin, end, c, span, bf16_span);
                        },
                        p.numel()});
      });
    }
  }
  gpu_updates.launch(where.c_str());
  detail::run_update_jobs(jobs);
  count_step();
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
                   "\"betas\" must be a list of two numbers, got {}", io::json_excerpt(b));
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
