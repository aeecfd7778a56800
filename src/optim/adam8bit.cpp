// Adam8bit / AdamW8bit (adam8bit.h): per parameter either 8-bit blockwise moments ("state1",
// "state2": one byte per element; "absmax1", "absmax2": one fp32 per block of 256) updated by
// the fused block kernel, or fp32 moments ("exp_avg", "exp_avg_sq") for small or overridden
// parameters. All parameters' updates run in one parallel pass (multi_tensor.h).
#include "mantissa/optim/adam8bit.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/inplace.h"
#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/module.h"
#include "optim/cuda_update.h"
#include "optim/loaded_state.h"
#include "optim/multi_tensor.h"

namespace mantissa::optim {
namespace {

namespace k = mantissa::kernels::optim;

bool is_half(const Tensor& p) { return p.dtype() == kFloat16 || p.dtype() == kBFloat16; }

int64_t num_blocks(int64_t n) { return (n + Adam8bit::kBlockSize - 1) / Adam8bit::kBlockSize; }

// First index of a non-finite value, or -1 (only run once a gradient is known to have one).
int64_t first_non_finite(const float* g, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(g[i])) return i;
  return -1;
}

// The first non-finite gradient value in parameter order, as (group, index, element), or
// element -1 when all are finite. One parallel pass over every gradient (a serial scan would
// cost a fifth of the parallel update).
struct NonFinite {
  size_t group = 0, index = 0;
  int64_t element = -1;
};
// Elements of a half parameter or gradient converted to fp32 at a time (a multiple of the
// 256-element block, so a chunk holds whole blocks): on the stack of the thread updating them.
constexpr int64_t kChunk = 2048;
static_assert(kChunk % Adam8bit::kBlockSize == 0, "a chunk must hold whole blocks");

// n fp32 values of src (dtype dt: float32, float16 or bfloat16) starting at element `at`: the
// tensor's own memory for float32, else converted into buf.
const float* fp32_view(const void* src, DType dt, int64_t at, int64_t n, float* buf) {
  if (dt == kFloat32) return static_cast<const float*>(src) + at;
  convert_buffer(static_cast<const uint8_t*>(src) + at * dt.itemsize(), dt, buf, kFloat32, n);
  return buf;
}

// The GPU gradients' check: one read when all are finite (cuda_update.h); only then are they
// brought to the host one by one to say where.
NonFinite find_non_finite_on_gpu(const std::vector<std::vector<Tensor>>& grads) {
  std::vector<std::pair<size_t, size_t>> which;
  std::vector<Tensor> gpu_grads;
  for (size_t gi = 0; gi < grads.size(); ++gi) {
    for (size_t i = 0; i < grads[gi].size(); ++i) {
      if (!grads[gi][i].defined() || !grads[gi][i].is_cuda()) continue;
      which.emplace_back(gi, i);
      gpu_grads.push_back(grads[gi][i]);
    }
  }
  if (detail::cuda_all_finite(gpu_grads)) return {};
  for (size_t k = 0; k < gpu_grads.size(); ++k) {
    const Tensor f = gpu_grads[k].to(kCPU);
    const int64_t at = first_non_finite(f.data<float>(), f.numel());
    if (at >= 0) return {which[k].first, which[k].second, at};
  }
  return {};
}

NonFinite find_non_finite(const std::vector<std::vector<Tensor>>& grads) {
  std::vector<detail::UpdateJob> jobs;
  std::vector<std::pair<size_t, size_t>> which;
  for (size_t gi = 0; gi < grads.size(); ++gi)
    for (size_t i = 0; i < grads[gi].size(); ++i)
      if (grads[gi][i].defined() && !grads[gi][i].is_cuda()) which.emplace_back(gi, i);
  std::unique_ptr<std::atomic<bool>[]> bad(new std::atomic<bool>[which.size()]);
  const k::AnyNonFiniteFn any_non_finite = k::any_non_finite_kernel(simd_level());
  for (size_t j = 0; j < which.size(); ++j) {
    bad[j].store(false, std::memory_order_relaxed);
    const Tensor& g = grads[which[j].first][which[j].second];
    const void* gp = g.data_ptr();
    const DType dt = g.dtype();
    std::atomic<bool>* flag = &bad[j];
    // Half gradients are scanned chunk by chunk (an fp32 copy of every gradient doubled the
    // step's peak memory).
    jobs.push_back({[=](int64_t begin, int64_t end) {
                      alignas(64) float buf[kChunk];
                      for (int64_t at = begin; at < end; at += kChunk) {
                        const int64_t n = std::min(kChunk, end - at);
                        if (any_non_finite(fp32_view(gp, dt, at, n, buf), n)) {
                          flag->store(true, std::memory_order_relaxed);
                          return;
                        }
                      }
                    },
                    g.numel()});
  }
  detail::run_update_jobs(jobs);
  for (size_t j = 0; j < which.size(); ++j) {
    if (!bad[j].load(std::memory_order_relaxed)) continue;
    NoGradGuard guard;
    const Tensor f = grads[which[j].first][which[j].second].to(kFloat32);
    return {which[j].first, which[j].second, first_non_finite(f.data<float>(), f.numel())};
  }
  return find_non_finite_on_gpu(grads);
}

}  // namespace

Adam8bit::Adam8bit(std::vector<Tensor> params, const Adam8bitOptions& options)
    : Adam8bit(std::move(params), options, /*adamw=*/false) {}

Adam8bit::Adam8bit(std::vector<Tensor> params, const Adam8bitOptions& options, bool adamw)
    : decoupled_name_(adamw), defaults_(options) {
  validate(options);
  add_param_group(std::move(params), options);
}

void Adam8bit::validate(const Adam8bitOptions& o) const {
  const std::string where(name());
  check_hyper(o.lr >= 0, where.c_str(), "learning rate", o.lr);
  check_hyper(o.eps >= 0, where.c_str(), "epsilon value", o.eps);
  check_hyper(o.betas.first >= 0 && o.betas.first < 1, where.c_str(), "beta parameter at index 0",
              o.betas.first);
  check_hyper(o.betas.second >= 0 && o.betas.second < 1, where.c_str(), "beta parameter at index 1",
              o.betas.second);
  check_hyper(o.weight_decay >= 0, where.c_str(), "weight_decay value", o.weight_decay);
  check_hyper(o.min_8bit_size >= 0, where.c_str(), "min_8bit_size",
              static_cast<double>(o.min_8bit_size));
}

void Adam8bit::add_param_group(std::vector<Tensor> params) {
  add_param_group(std::move(params), defaults_);
}

void Adam8bit::add_param_group(std::vector<Tensor> params, const Adam8bitOptions& options) {
  validate(options);
  const size_t count = params.size();
  add_params(std::move(params));
  options_.push_back(options);
  optim_bits_.emplace_back(count, 0);
  init_half_state(options_.size() - 1);
}

const Adam8bitOptions& Adam8bit::options(size_t group) const {
  MANTISSA_CHECK(group < options_.size(), std::string(name()).c_str(),
                 "param group {} out of range ({} groups)", group, options_.size());
  return options_[group];
}

void Adam8bit::set_lr(size_t group, double lr) {
  options(group);
  check_hyper(lr >= 0, std::string(name()).c_str(), "learning rate", lr);
  options_[group].lr = lr;
}

HalfPrecisionOptions Adam8bit::half_precision(size_t group) const {
  // The moments are fp32 (or 8-bit) for every parameter dtype.
  HalfPrecisionOptions h;
  h.master_weights = options(group).master_weights;
  h.fp32_state = true;
  return h;
}

bool Adam8bit::is_8bit(size_t group, size_t index) const {
  // Existing state keeps its format (a loaded checkpoint decides it); otherwise the override
  // and the size do.
  const ParamState& st = state_at(group, index);
  if (st.buffers.count("state1")) return true;
  if (st.buffers.count("exp_avg")) return false;
  const int bits = optim_bits_[group][index];
  return bits != 32 && params(group)[index].numel() >= options_[group].min_8bit_size;
}

std::pair<size_t, size_t> Adam8bit::locate(const Tensor& param, const char* where) const {
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (size_t i = 0; i < params(g).size(); ++i)
      if (params(g)[i].is_same(param)) return {g, i};
  fail(where, "the parameter (shape {}) is not optimized by this optimizer",
       shape_str(param.shape()));
}

bool Adam8bit::uses_8bit_state(const Tensor& param) const {
  const std::string where(name());
  auto [g, i] = locate(param, where.c_str());
  return is_8bit(g, i);
}

void Adam8bit::override_config(const Tensor& param, std::string_view key, int64_t value) {
  const std::string where = std::string(name()) + "::override_config";
  MANTISSA_CHECK(key == "optim_bits", where.c_str(),
                 "unknown key '{}'; the only per-parameter key is 'optim_bits' (8 or 32)", key);
  MANTISSA_CHECK(value == 8 || value == 32, where.c_str(), "optim_bits must be 8 or 32, got {}",
                 value);
  auto [g, i] = locate(param, where.c_str());
  const ParamState& st = state_at(g, i);
  const bool now_8bit = value == 8 && param.numel() >= options_[g].min_8bit_size;
  MANTISSA_CHECK(st.step == 0 || now_8bit == is_8bit(g, i), where.c_str(),
                 "parameter {} (shape {}) already has {}-bit state after {} steps; set "
                 "optim_bits before its first step",
                 param_index(g, i), shape_str(param.shape()), is_8bit(g, i) ? 8 : 32, st.step);
  optim_bits_[g][i] = static_cast<int>(value);
}

// The caller has scanned every gradient (a loss scaler's unscale): a second scan would be a
// full pass over the gradients (about a tenth of the 8-bit step) for nothing.
void Adam8bit::step_with_finite_grads() { step_impl(/*scan_gradients=*/false); }

void Adam8bit::step() { step_impl(/*scan_gradients=*/true); }

void Adam8bit::step_impl(bool scan_gradients) {
  const std::string where(name());
  const std::vector<std::vector<Tensor>> grads = checked_grads(where.c_str());
  // GPU parameters are refused before anything changes when their update has no GPU kernel:
  // float32 parameters and gradients only (the LoRA adapters of the 4-bit precisions are).
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    for (size_t i = 0; i < params(gi).size(); ++i) {
      const Tensor& p = params(gi)[i];
      const Tensor& g = grads[gi][i];
      if (!p.is_cuda() || !g.defined()) continue;
      MANTISSA_CHECK(g.device() == p.device(), where.c_str(),
                     "the gradient of parameter {} (on {}) is on {}; move both to one device",
                     param_index(gi, i), p.device().str(), g.device().str());
      MANTISSA_CHECK(
          p.dtype() == kFloat32 && g.dtype() == kFloat32 && p.is_contiguous() && g.is_contiguous(),
          where.c_str(),
          "parameter {} is a {} {} tensor with a {} gradient on {}: the 8-bit "
          "optimizers' GPU kernels take contiguous float32 parameters and gradients "
          "(the LoRA adapters of the 4-bit precisions are); keep such parameters in "
          "float32 or use adamw (--optimizer adamw)",
          param_index(gi, i), p.is_contiguous() ? "contiguous" : "strided", p.dtype().name(),
          g.dtype().name(), p.device().str());
    }
  }

  // Checked finite before anything changes.
  const NonFinite bad = scan_gradients ? find_non_finite(grads) : NonFinite{};
  if (bad.element >= 0) {
    NoGradGuard guard;
    const Tensor f = grads[bad.group][bad.index].to(kCPU).to(kFloat32);
    throw NonFiniteGradient(
        fmt::format("[{}] the gradient of parameter {} (shape {}) has a non-finite value ({}) at "
                    "element {}; the step was refused and no state changed (under fp16 "
                    "training a GradScaler skips such steps)",
                    where, param_index(bad.group, bad.index), shape_str(f.shape()),
                    f.data<float>()[bad.element], bad.element),
        params(bad.group)[bad.index]);
  }
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (const Tensor& p : params(gi))
      MANTISSA_CHECK(p.dtype() != kFloat64, where.c_str(),
                     "float64 parameters are not supported by the 8-bit optimizers; use Adam or "
                     "AdamW (--optimizer adam or adamw)");

  const SimdLevel level = simd_level();
  const k::Adam8bitBlocksFn blocks_kernel = k::adam8bit_blocks_kernel(level);
  const k::Adam32SpanFn span_kernel = k::adam32_span_kernel(level);
  const k::Adam8bitMaps& maps = k::dynamic_adam8bit_maps();

  std::vector<detail::UpdateJob> jobs;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const Adam8bitOptions& o = options_[gi];
    const auto& ps = params(gi);
    for (size_t i = 0; i < ps.size(); ++i) {
      const Tensor& p = ps[i];
      const Tensor& g = grads[gi][i];
      if (!g.defined()) continue;
      ParamState& st = state_for_update(gi, i);
      st.step += 1;
      const double t = static_cast<double>(st.step);
      const double c1 = 1 - std::pow(o.betas.first, t);
      const double c2 = std::sqrt(1 - std::pow(o.betas.second, t));
      k::Adam8bitScalars s{};
      s.beta1 = static_cast<float>(o.betas.first);
      s.one_minus_beta1 = static_cast<float>(1 - o.betas.first);
      s.beta2 = static_cast<float>(o.betas.second);
      s.one_minus_beta2 = static_cast<float>(1 - o.betas.second);
      s.step_size = static_cast<float>(-o.lr * c2 / c1);
      s.eps_scaled = static_cast<float>(o.eps * c2);
      s.decay = static_cast<float>(1 - o.lr * o.weight_decay);
      s.apply_decay = o.weight_decay > 0;

      if (p.is_cuda()) {  // the same scalars and arithmetic, on the GPU (cuda_update.h)
        const int64_t n = p.numel();
        const cuda::detail::Adam8bitStep gs{s.beta1,           s.one_minus_beta1, s.beta2,
                                            s.one_minus_beta2, s.step_size,       s.eps_scaled,
                                            s.decay,           s.apply_decay};
        if (is_8bit(gi, i)) {
          detail::cuda_adam8bit_update(
              p, g, gs, maps.code1, maps.code2,
              state_buffer(st, "state1", p.shape(), kUInt8, p.device()),
              state_buffer(st, "state2", p.shape(), kUInt8, p.device()),
              state_buffer(st, "absmax1", {num_blocks(n)}, kFloat32, p.device()),
              state_buffer(st, "absmax2", {num_blocks(n)}, kFloat32, p.device()));
        } else {
          detail::cuda_adam32_update(
              p, g, gs, state_buffer(st, "exp_avg", p.shape(), kFloat32, p.device()),
              state_buffer(st, "exp_avg_sq", p.shape(), kFloat32, p.device()));
        }
        continue;
      }

      // Half parameters and gradients pass through fp32 chunks of kChunk elements on the
      // updating thread's stack: the parameter (or its fp32 master, updated in place) and the
      // gradient are read as fp32, and the parameter is rounded back (RNE) chunk by chunk.
      // Whole fp32 copies of every parameter and gradient cost 8 bytes per parameter at the
      // step: bf16-true with adamw8bit peaked above bf16-true with adamw.
      const bool half = is_half(p);
      float* master =
          half && uses_master(gi, p) ? st.buffers.at("master_param").data<float>() : nullptr;
      void* praw = p.data_ptr();
      const DType pdt = p.dtype();
      const void* graw = g.data_ptr();
      const DType gdt = g.dtype();
      // update(p32, g32, at, count) on elements [at, at + count) of [begin, end).
      auto chunked = [=](int64_t begin, int64_t end, auto&& update) {
        if (!half && gdt == kFloat32) {
          update(static_cast<float*>(praw) + begin, static_cast<const float*>(graw) + begin, begin,
                 end - begin);
          return;
        }
        alignas(64) float pbuf[kChunk];
        alignas(64) float gbuf[kChunk];
        for (int64_t at = begin; at < end; at += kChunk) {
          const int64_t n = std::min(kChunk, end - at);
          float* pp = !half ? static_cast<float*>(praw) + at : master ? master + at : pbuf;
          if (half && master == nullptr)
            convert_buffer(static_cast<const uint8_t*>(praw) + at * pdt.itemsize(), pdt, pbuf,
                           kFloat32, n);
          update(pp, fp32_view(graw, gdt, at, n, gbuf), at, n);
          if (half)
            convert_buffer(pp, kFloat32, static_cast<uint8_t*>(praw) + at * pdt.itemsize(), pdt, n);
        }
      };
      const int64_t n = p.numel();
      if (is_8bit(gi, i)) {
        uint8_t* q1 = state_buffer(st, "state1", p.shape(), kUInt8, p.device()).data<uint8_t>();
        uint8_t* q2 = state_buffer(st, "state2", p.shape(), kUInt8, p.device()).data<uint8_t>();
        float* a1 =
            state_buffer(st, "absmax1", {num_blocks(n)}, kFloat32, p.device()).data<float>();
        float* a2 =
            state_buffer(st, "absmax2", {num_blocks(n)}, kFloat32, p.device()).data<float>();
        // Element ranges from the splitter; each block is done by the range holding its start.
        jobs.push_back({[=, &maps](int64_t begin, int64_t end) {
                          const int64_t bs = kBlockSize;
                          const int64_t first = (begin + bs - 1) / bs;
                          const int64_t last = (end + bs - 1) / bs;  // one past
                          if (first >= last) return;
                          // Chunks start on block edges (kChunk is a multiple of the block).
                          chunked(first * bs, std::min(last * bs, n),
                                  [&](float* pp, const float* gp, int64_t at, int64_t count) {
                                    blocks_kernel(s, maps, pp, gp, q1 + at, q2 + at, a1 + at / bs,
                                                  a2 + at / bs, count);
                                  });
                        },
                        n});
      } else {
        float* m = state_buffer(st, "exp_avg", p.shape(), kFloat32, p.device()).data<float>();
        float* v = state_buffer(st, "exp_avg_sq", p.shape(), kFloat32, p.device()).data<float>();
        jobs.push_back({[=](int64_t begin, int64_t end) {
                          chunked(begin, end,
                                  [&](float* pp, const float* gp, int64_t at, int64_t count) {
                                    span_kernel(s, pp, gp, m + at, v + at, count);
                                  });
                        },
                        n});
      }
    }
  }
  detail::run_update_jobs(jobs);
  count_step();
}

nlohmann::json Adam8bit::group_options_json(size_t group) const {
  const Adam8bitOptions& o = options(group);
  nlohmann::json overrides = nlohmann::json::object();
  for (size_t i = 0; i < optim_bits_[group].size(); ++i)
    if (optim_bits_[group][i] != 0) overrides[std::to_string(i)] = optim_bits_[group][i];
  return {{"lr", o.lr},
          {"betas", {o.betas.first, o.betas.second}},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"min_8bit_size", o.min_8bit_size},
          {"master_weights", o.master_weights},
          {"optim_bits", overrides}};
}

void Adam8bit::set_group_options_json(size_t group, const nlohmann::json& j) {
  const std::string where(name());
  Adam8bitOptions o = options(group);
  o.lr = j.value("lr", o.lr);
  if (j.contains("betas")) {
    const auto& b = j.at("betas");
    MANTISSA_CHECK(b.is_array() && b.size() == 2, where.c_str(),
                   "\"betas\" must be a list of two numbers, got {}", io::json_excerpt(b));
    o.betas = {b[0].get<double>(), b[1].get<double>()};
  }
  o.eps = j.value("eps", o.eps);
  o.weight_decay = j.value("weight_decay", o.weight_decay);
  o.min_8bit_size = j.value("min_8bit_size", o.min_8bit_size);
  // master_weights fixes the state layout: it stays as constructed.
  validate(o);
  std::vector<int> bits(optim_bits_[group].size(), 0);
  if (j.contains("optim_bits")) {
    for (const auto& [pos, value] : j.at("optim_bits").items()) {
      const size_t idx = std::stoul(pos);
      const int v = value.get<int>();
      MANTISSA_CHECK(idx < bits.size() && (v == 8 || v == 32), where.c_str(),
                     "bad optim_bits override {}: {} in a group of {} parameters", pos, v,
                     bits.size());
      bits[idx] = v;
    }
  }
  // A loaded state keeps its format (is_8bit): an override set on this optimizer before the
  // load that asks for the other one does not apply, which must not pass in silence (a resumed
  // run given another --optim-bits-32).
  const bool configured = std::any_of(optim_bits_[group].begin(), optim_bits_[group].end(),
                                      [](int b) { return b != 0; });
  for (size_t i = 0; configured && i < bits.size(); ++i) {
    // Parameters below min_8bit_size keep 32-bit state whatever the override.
    if (params(group)[i].numel() < o.min_8bit_size) continue;
    if ((bits[i] == 32) == (optim_bits_[group][i] == 32)) continue;
    warn(fmt::format(
        "{}: parameter {} (shape {}) keeps the {}-bit state of the checkpoint; this optimizer's "
        "optim_bits override ({}) applies to new state only (a resumed run keeps the overrides, "
        "such as --optim-bits-32, it was started with; start a new run to change them)",
        where, param_index(group, i), shape_str(params(group)[i].shape()), bits[i] == 32 ? 32 : 8,
        optim_bits_[group][i] == 32 ? "32 bits" : "none"));
  }
  options_[group] = o;
  optim_bits_[group] = std::move(bits);
}

Tensor Adam8bit::loaded_buffer(size_t group, size_t index, const std::string& buf,
                               const Tensor& saved, const std::string& key) const {
  const std::string where = std::string(name()) + "::load_state_dict";
  const Tensor& p = params(group)[index];
  Shape shape = p.shape();
  DType dtype = kFloat32;
  if (buf == "state1" || buf == "state2") {
    dtype = kUInt8;
  } else if (buf == "absmax1" || buf == "absmax2") {
    shape = {num_blocks(p.numel())};
  } else if (buf != "exp_avg" && buf != "exp_avg_sq" && buf != "master_param") {
    fail(where, "unexpected state buffer '{}' in '{}'", buf, key);
  }
  MANTISSA_CHECK(saved.defined() && saved.shape() == shape, where.c_str(),
                 "tensor '{}' has shape {}, but parameter {} (shape {}) needs {}: the checkpoint "
                 "is for a model of another shape",
                 key, saved.defined() ? shape_str(saved.shape()) : "undefined",
                 param_index(group, index), shape_str(p.shape()), shape_str(shape));
  MANTISSA_CHECK(dtype != kUInt8 || saved.dtype() == kUInt8, where.c_str(),
                 "tensor '{}' has dtype {}; 8-bit state codes are uint8", key,
                 saved.dtype().name());
  MANTISSA_CHECK(dtype == kUInt8 || saved.dtype().is_floating_point(), where.c_str(),
                 "tensor '{}' has dtype {}; this state is floating point (the file is damaged or "
                 "not a checkpoint of this model)",
                 key, saved.dtype().name());
  detail::check_loaded_state_values(saved.detach(), key, where.c_str(),
                                    detail::non_negative_state(buf));
  Tensor copy = empty(shape, dtype);
  mantissa::detail::copy_unchecked(copy, saved.detach());
  return copy;
}

void Adam8bit::check_loaded_state(size_t group, const ParamState& state) const {
  if (state.step == 0) return;
  const std::string where = std::string(name()) + "::load_state_dict";
  // The buffers present decide the format (is_8bit); they must be complete.
  const bool has8 = state.buffers.count("state1") || state.buffers.count("state2") ||
                    state.buffers.count("absmax1") || state.buffers.count("absmax2");
  const bool has32 = state.buffers.count("exp_avg") || state.buffers.count("exp_avg_sq");
  MANTISSA_CHECK(!(has8 && has32), where.c_str(),
                 "a parameter's state has both 8-bit and 32-bit moments");
  const std::vector<const char*> needed =
      has8 ? std::vector<const char*>{"state1", "state2", "absmax1", "absmax2"}
           : std::vector<const char*>{"exp_avg", "exp_avg_sq"};
  for (const char* buf : needed)
    MANTISSA_CHECK(state.buffers.count(buf), where.c_str(),
                   "state of a parameter at step {} lacks its '{}' tensor", state.step, buf);
}

std::vector<std::string> override_optim_bits(Adam8bit& optimizer, const nn::Module& model,
                                             const std::vector<std::string>& name_substrings,
                                             int bits) {
  // Only the trainable parameters: the optimizer holds no state for frozen ones (a LoRA model's
  // base weights), so naming one fails, and suggesting them sent the user to names that cannot
  // be given.
  nn::Module::NamedTensors named;
  std::vector<std::string> frozen;
  for (const auto& [pname, t] : model.named_parameters()) {
    if (t.requires_grad())
      named.emplace_back(pname, t);
    else
      frozen.push_back(pname);
  }
  std::vector<std::string> done;
  for (const std::string& want : name_substrings) {
    bool any = false;
    for (const auto& [pname, t] : named) {
      if (pname.find(want) == std::string::npos) continue;
      optimizer.override_config(t, "optim_bits", bits);
      done.push_back(pname);
      any = true;
    }
    if (any) continue;
    // Ranked by how close `want` comes to a part of each name (it is matched as a substring):
    // "lm_haed" is one swap from "lm_head.weight", however long the rest of the name.
    std::vector<std::pair<size_t, std::string>> ranked;
    for (const auto& [pname, t] : named) {
      size_t best = edit_distance(want, pname);
      for (size_t len = want.size() > 2 ? want.size() - 2 : 1; len <= want.size() + 2; ++len)
        for (size_t at = 0; at + len <= pname.size(); ++at)
          best = std::min(best, edit_distance(want, pname.substr(at, len)));
      ranked.emplace_back(best, pname);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> close;
    for (size_t i = 0; i < ranked.size() && i < 5; ++i) close.push_back(ranked[i].second);
    const auto frozen_match = std::find_if(frozen.begin(), frozen.end(), [&](const auto& f) {
      return f.find(want) != std::string::npos;
    });
    fail("override_optim_bits", "no {}parameter name contains '{}'{}; closest names: {}",
         frozen.empty() ? "" : "trainable ", want,
         frozen_match == frozen.end()
             ? std::string()
             : fmt::format(" (frozen {} does, but frozen parameters have no optimizer state)",
                           *frozen_match),
         close.empty() ? std::string("(the model has no trainable parameters)")
                       : fmt::format("{}", fmt::join(close, ", ")));
  }
  return done;
}

std::vector<std::string> keep_embeddings_32bit(Adam8bit& optimizer, nn::Module& model) {
  std::vector<const TensorImpl*> weights;
  model.apply([&](nn::Module& m) {
    if (dynamic_cast<nn::Embedding*>(&m) == nullptr) return;
    for (const auto& [n, t] : m.named_parameters(/*recurse=*/false))
      weights.push_back(t.impl_ptr().get());
  });
  std::vector<std::string> done;
  for (const auto& [pname, t] : model.named_parameters())
    if (std::find(weights.begin(), weights.end(), t.impl_ptr().get()) != weights.end()) {
      optimizer.override_config(t, "optim_bits", 32);
      done.push_back(pname);
    }
  return done;
}

}  // namespace mantissa::optim
