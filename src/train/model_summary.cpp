#include "mantissa/train/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "mantissa/core/error.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/train_module.h"

namespace mantissa::train {
namespace {

int depth_of(const std::string& qualified) {
  return 1 + static_cast<int>(std::count(qualified.begin(), qualified.end(), '.'));
}

// 803 K, 1.2 M, 3.4 B, as Lightning prints counts.
std::string short_count(int64_t n) {
  if (n < 1000) return std::to_string(n);
  if (n < 1000000) return fmt::format("{:.1f} K", static_cast<double>(n) / 1e3);
  if (n < 1000000000) return fmt::format("{:.1f} M", static_cast<double>(n) / 1e6);
  return fmt::format("{:.1f} B", static_cast<double>(n) / 1e9);
}

std::string short_bytes(int64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (int64_t{1} << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  if (b < (int64_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / 1048576);
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / 1073741824.0);
}

LayerSummary summarize(const std::string& name, const nn::Module& m) {
  LayerSummary s;
  s.name = name;
  s.type = m.name();
  std::set<std::string> dtypes;
  for (const auto& [pname, p] : m.named_parameters()) {
    s.parameters += p.numel();
    if (p.requires_grad()) s.trainable_parameters += p.numel();
    dtypes.insert(std::string(p.dtype().name()));
  }
  // Quantized weights (4-bit codes, int8) are frozen buffers, not parameters; counted as the
  // non-trainable weights they stand for, as a LoRA run's frozen base weights are
  // (int8-training's weights are parameters, counted above already).
  s.parameters += BitsandbytesPrecision::quantized_stats(m).buffer_weight_numel;
  for (const auto& d : dtypes) s.dtypes += (s.dtypes.empty() ? "" : ",") + d;
  // Each tensor once (named_parameters/named_buffers drop the second name of a shared module's
  // or tied tensor; state_dict() keeps both names, which would count its bytes twice).
  for (const auto& [key, t] : m.named_parameters())
    s.state_bytes += static_cast<int64_t>(t.nbytes());
  for (const auto& [key, t] : m.named_buffers()) s.state_bytes += static_cast<int64_t>(t.nbytes());
  return s;
}

}  // namespace

std::vector<LayerSummary> summarize_layers(const nn::Module& model, int max_depth) {
  MANTISSA_CHECK(max_depth >= 1, "model_summary", "max_depth must be at least 1, got {}",
                 max_depth);
  std::vector<LayerSummary> rows;
  for (const auto& [name, m] : model.named_modules()) {
    if (name.empty() || depth_of(name) > max_depth) continue;
    rows.push_back(summarize(name, *m));
  }
  return rows;
}

ModelSummaryTotals summarize_totals(const nn::Module& model) {
  const LayerSummary all = summarize("", model);
  return {all.parameters, all.trainable_parameters, all.state_bytes};
}

std::string model_summary(const nn::Module& model, int max_depth) {
  const std::vector<LayerSummary> rows = summarize_layers(model, max_depth);
  size_t wn = 4, wt = 4, wd = 5;
  for (const auto& r : rows) {
    wn = std::max(wn, r.name.size());
    wt = std::max(wt, r.type.size());
    wd = std::max(wd, r.dtypes.size());
  }
  std::string out = fmt::format("   | {:<{}} | {:<{}} | {:>8} | {:>9} | {:<{}} | {:>10}\n", "Name",
                                wn, "Type", wt, "Params", "Trainable", "Dtype", wd, "Size");
  out += std::string(out.size() - 1, '-') + "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out += fmt::format("{:<2} | {:<{}} | {:<{}} | {:>8} | {:>9} | {:<{}} | {:>10}\n", i, r.name, wn,
                       r.type, wt, short_count(r.parameters), short_count(r.trainable_parameters),
                       r.dtypes, wd, short_bytes(r.state_bytes));
  }
  const ModelSummaryTotals t = summarize_totals(model);
  out += fmt::format("{:<10} Trainable params\n", short_count(t.trainable_parameters));
  out += fmt::format("{:<10} Non-trainable params\n",
                     short_count(t.parameters - t.trainable_parameters));
  out += fmt::format("{:<10} Total params\n", short_count(t.parameters));
  out +=
      fmt::format("{:<10} Total state size (parameters and buffers)\n", short_bytes(t.state_bytes));
  return out;
}

ModelSummary::ModelSummary(int max_depth) : max_depth_(max_depth) {
  MANTISSA_CHECK(max_depth >= 1, "ModelSummary", "max_depth must be at least 1, got {}", max_depth);
}

void ModelSummary::on_fit_start(Trainer&, TrainModule& module) {
  fmt::print("{}", model_summary(module, max_depth_));
}

}  // namespace mantissa::train
