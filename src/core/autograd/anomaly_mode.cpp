// Anomaly detection: the switch, the parameter labels, and the forward/backward checks that
// record() and the engine call while it is on (docs/anomaly.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <complex>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/autograd/anomaly.h"
#include "core/dtype_dispatch.h"
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::autograd {

namespace {
template <typename... Args>
[[noreturn]] void throw_anomaly(fmt::format_string<Args...> f, Args&&... args) {
  throw AnomalyDetected(
      fmt::format("[detect_anomaly] {}", fmt::format(f, std::forward<Args>(args)...)));
}
}  // namespace
namespace detail {

std::atomic<bool> g_anomaly_enabled{false};

namespace {

// Parameter -> qualified module path ("blocks0.attn.qkv"; "" for a parameter of the root).
struct Label {
  std::weak_ptr<TensorImpl> param;
  std::string layer;
};
std::mutex g_labels_mutex;
std::unordered_map<const TensorImpl*, Label> g_labels;
// Labels of cast copies come and go with the copies (autocast makes new ones after every
// optimizer step); entries whose tensor is gone are dropped when the map has doubled.
size_t g_labels_pruned_at = 64;

std::atomic<uint64_t> g_sequence{0};
thread_local TolerateBackwardAnomalies* t_tolerate = nullptr;

// The label of a parameter or of a cast copy of one, or nullptr (the impl must still be the
// labelled tensor).
const std::string* label_of(const Tensor& t) {
  if (!t.defined()) return nullptr;
  std::lock_guard<std::mutex> lock(g_labels_mutex);
  auto it = g_labels.find(&t.impl());
  if (it == g_labels.end() || it->second.param.lock() != t.impl_ptr()) return nullptr;
  return &it->second.layer;
}

struct NonFinite {
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  bool any() const { return nan + pos_inf + neg_inf > 0; }
  bool any_inf() const { return pos_inf + neg_inf > 0; }
};

void tally(double v, NonFinite& c) {
  if (std::isnan(v)) {
    ++c.nan;
  } else if (std::isinf(v)) {
    ++(v > 0 ? c.pos_inf : c.neg_inf);
  }
}

NonFinite count_non_finite(const Tensor& t) {
  NonFinite c;
  if (!t.defined() || t.numel() == 0) return c;
  const DType dt = t.dtype();
  if (!dt.is_floating_point() && !dt.is_complex()) return c;
  Tensor d = t.detach().contiguous();
  if (dt.is_complex()) {
    for (const auto& z : d.to(kComplex128).to_vector<std::complex<double>>()) {
      tally(z.real(), c);
      tally(z.imag(), c);
    }
    return c;
  }
  for (double v : d.to_vector<double>()) tally(v, c);
  return c;
}

std::string describe(const NonFinite& c, int64_t numel) {
  std::string s;
  auto part = [&](int64_t n, const char* what) {
    if (n == 0) return;
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {}", n, what);
  };
  part(c.nan, "NaN");
  part(c.pos_inf, "+inf");
  part(c.neg_inf, "-inf");
  return fmt::format("{} of {} elements", s, numel);
}

// "LinearBackward" -> "linear", "ScatterAddBackward" -> "scatter_add".
std::string op_name(const std::string& node_name) {
  std::string base = node_name;
  if (base.size() > 8 && base.ends_with("Backward")) base.resize(base.size() - 8);
  std::string out;
  for (size_t i = 0; i < base.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(base[i]);
    if (std::isupper(ch)) {
      if (i > 0 && !std::isupper(static_cast<unsigned char>(base[i - 1]))) out += '_';
      out += static_cast<char>(std::tolower(ch));
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string layer_text(const std::string& layer) {
  return layer.empty() ? std::string(
                             "an unlabelled layer (pass named parameters to "
                             "detect_anomaly to name it)")
                       : "layer '" + layer + "'";
}

std::string meta_text(const InputMeta& m) {
  return fmt::format("{}{}", m.dtype.name(), shape_str(m.shape));
}

std::string inputs_text(const Node& node) {
  std::string s;
  for (size_t i = 0; i < node.input_meta.size(); ++i) {
    if (!s.empty()) s += ", ";
    s += fmt::format("#{} {}", i, meta_text(node.input_meta[i]));
  }
  return s.empty() ? "none" : s;
}

}  // namespace

void check_forward(Node& node, const Tensor& output, const std::vector<Tensor>& inputs) {
  node.sequence = ++g_sequence;
  // Layer: a labelled parameter among the inputs (or behind the autocast copy of one), else
  // the layer of the most recent input.
  const std::string* param_layer = nullptr;
  const Node* latest = nullptr;
  for (const Tensor& in : inputs) {
    if (!in.defined()) continue;
    if (const std::string* l = label_of(in)) {
      param_layer = l;
      break;
    }
    const Node* fn = in.impl().grad_fn.get();
    if (fn != nullptr && !fn->layer.empty() &&
        (latest == nullptr || fn->sequence > latest->sequence))
      latest = fn;
  }
  if (param_layer != nullptr) {
    node.layer = *param_layer;
    // A cast of a parameter (Tensor::to under a precision plugin) stands for the parameter.
    if (node.name() == "ToCopyBackward" && inputs.size() == 1)
      inherit_parameter_label(output, inputs[0]);
  } else if (latest != nullptr) {
    node.layer = latest->layer;
  }

  NoGradGuard no_grad;  // the checks below must not record nodes of their own
  const NonFinite out = count_non_finite(output);
  if (!out.any()) return;
  std::string inputs_state;
  bool input_nan = false, input_inf = false;
  int64_t cast_copy = -1;  // an input that is a dtype cast of a parameter and went non-finite
  for (size_t i = 0; i < inputs.size(); ++i) {
    const NonFinite c = count_non_finite(inputs[i]);
    input_nan |= c.nan > 0;
    input_inf |= c.any_inf();
    if (!c.any()) continue;
    inputs_state += fmt::format("; input #{} already held {}", i, describe(c, inputs[i].numel()));
    if (cast_copy < 0 && !inputs[i].is_leaf() && label_of(inputs[i]) != nullptr)
      cast_copy = static_cast<int64_t>(i);
  }
  // An infinity is this op's doing only when no input carried one; `where` places the values
  // it is given (attention masks fill -inf on purpose), so its infinities are not anomalies.
  const bool is_where = node.name() == "WhereBackward";
  if (out.nan == 0 && (input_inf || is_where)) return;
  std::string origin =
      cast_copy >= 0
          ? fmt::format(
                " (input #{} is the {} copy of a parameter of {}: the parameter's values "
                "do not fit that dtype, or were already non-finite)",
                cast_copy, inputs[cast_copy].dtype().name(), layer_text(node.layer))
      : input_nan || input_inf
          ? " (an input was already non-finite and no recorded op made it so: check the "
            "batch, or values computed outside autograd)"
          : " (its inputs were finite: this op made the first non-finite value)";
  throw_anomaly("forward op '{}' ({}) produced {} in {}; inputs: {}{}{}", op_name(node.name()),
                node.name(), describe(out, output.numel()), layer_text(node.layer),
                inputs_text(node), inputs_state, origin);
}

void inherit_parameter_label(const Tensor& copy, const Tensor& source) {
  if (!anomaly_enabled() || !copy.defined()) return;
  std::lock_guard<std::mutex> lock(g_labels_mutex);
  auto it = g_labels.find(&source.impl());
  if (it == g_labels.end() || it->second.param.lock() != source.impl_ptr()) return;
  const std::string layer = it->second.layer;
  if (g_labels.size() >= 2 * g_labels_pruned_at) {
    std::erase_if(g_labels, [](const auto& kv) { return kv.second.param.expired(); });
    g_labels_pruned_at = std::max<size_t>(64, g_labels.size());
  }
  g_labels[&copy.impl()] = {copy.impl_ptr(), layer};
}

void check_cast_copy(const Tensor& copy, const Tensor& source) {
  if (!anomaly_enabled()) return;
  NoGradGuard no_grad;
  const NonFinite out = count_non_finite(copy);
  if (!out.any() || count_non_finite(source).any()) return;
  const std::string* layer = label_of(source);
  throw_anomaly(
      "autocast's {} copy of a {} parameter {} of {} holds {}: the parameter's values "
      "exceed {}'s range (lower the learning rate, clip gradients, or train in bf16-mixed)",
      copy.dtype().name(), source.dtype().name(), shape_str(source.shape()),
      layer_text(layer ? *layer : std::string()), describe(out, copy.numel()), copy.dtype().name());
}

void check_backward(const Node& node, const std::vector<Tensor>& grads) {
  NoGradGuard no_grad;
  for (size_t i = 0; i < grads.size(); ++i) {
    const NonFinite c = count_non_finite(grads[i]);
    if (!c.any()) continue;
    note_backward_anomaly(fmt::format(
        "backward of op '{}' ({}) in {} returned {} in the gradient of input #{} ({}); forward "
        "inputs: {}",
        op_name(node.name()), node.name(), layer_text(node.layer), describe(c, grads[i].numel()), i,
        i < node.input_meta.size() ? meta_text(node.input_meta[i]) : std::string("?"),
        inputs_text(node)));
    return;
  }
}

}  // namespace detail

std::string non_finite_summary(const Tensor& t) {
  NoGradGuard no_grad;
  const detail::NonFinite c = detail::count_non_finite(t);
  return c.any() ? detail::describe(c, t.numel()) : std::string();
}

bool is_anomaly_enabled() { return detail::anomaly_enabled(); }

void set_detect_anomaly(bool enabled) { detail::g_anomaly_enabled.store(enabled); }

void set_anomaly_parameter_names(const AnomalyNamedTensors& named) {
  std::lock_guard<std::mutex> lock(detail::g_labels_mutex);
  detail::g_labels.clear();
  for (const auto& [name, t] : named) {
    if (!t.defined()) continue;
    const size_t dot = name.rfind('.');
    detail::g_labels[&t.impl()] = {t.impl_ptr(),
                                   dot == std::string::npos ? std::string() : name.substr(0, dot)};
  }
}

void clear_anomaly_parameter_names() {
  std::lock_guard<std::mutex> lock(detail::g_labels_mutex);
  detail::g_labels.clear();
}

detect_anomaly::detect_anomaly() : previous_(is_anomaly_enabled()), relabelled_(false) {
  set_detect_anomaly(true);
}

detect_anomaly::detect_anomaly(const AnomalyNamedTensors& named_parameters)
    : previous_(is_anomaly_enabled()), relabelled_(true) {
  set_anomaly_parameter_names(named_parameters);
  set_detect_anomaly(true);
}

detect_anomaly::~detect_anomaly() {
  set_detect_anomaly(previous_);
  if (relabelled_) clear_anomaly_parameter_names();
}

TolerateBackwardAnomalies::TolerateBackwardAnomalies() : previous_(detail::t_tolerate) {
  detail::t_tolerate = this;
}

TolerateBackwardAnomalies::~TolerateBackwardAnomalies() { detail::t_tolerate = previous_; }

void note_backward_anomaly(const std::string& report) {
  TolerateBackwardAnomalies* t = detail::t_tolerate;
  if (t == nullptr) throw_anomaly("{}", report);
  if (t->first_.empty()) t->first_ = report;
}

}  // namespace mantissa::autograd
