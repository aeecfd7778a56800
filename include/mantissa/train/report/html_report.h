#pragma once
// A self-contained HTML page comparing training runs in different precisions: loss curves on
// one chart, bars for throughput and memory, the table and the machine. Inline SVG and CSS
// only: no scripts, fonts or images from the network, so it opens offline and in CI artifacts.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mantissa::train {

struct ReportRun {
  std::string precision;
  std::vector<double> step_losses;  // one per optimizer step; non-finite ones are not drawn
  double test_accuracy = 0;
  double final_loss = 0;  // mean training loss of the last epoch
  double samples_per_second = 0;
  double peak_memory_bytes = 0;
  std::optional<int64_t> skipped_steps;  // loss-scaled runs only
  // Its speed-up is marked "?" (its timing rounds, or the baseline's, far apart), as the
  // console table marks it; ReportInfo::unreliable_speedup_note explains the mark.
  bool speedup_unreliable = false;
};

struct ReportInfo {
  std::string title = "mantissa compare";
  std::string baseline;  // the run the ratios refer to (usually "32-true")
  std::vector<std::pair<std::string, std::string>> settings;  // model, epochs, ... (shown)
  std::string machine;  // free text (CPU features, threads), shown preformatted
  // Shown prominently under the title, e.g. that bf16 is emulated (and slow) on this CPU.
  std::vector<std::string> warnings;
  // What a "?" after a speed-up means, shown under the table when a row has one.
  std::string unreliable_speedup_note;
};

std::string html_escape(const std::string& s);

// The charts on their own, for reuse and tests. Values map linearly from 0 (bars) or from the
// data range (lines) onto the plot area.
std::string svg_line_chart(const std::vector<std::pair<std::string, std::vector<double>>>& series,
                           const std::string& title, const std::string& x_label,
                           const std::string& y_label);
std::string svg_bar_chart(const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& title, const std::string& unit);
// Series over shared x values (point i of each at xs[i]), x ticks at "nice" values labelled by
// x_tick_text (default: the number), a dashed vertical line at marker_x when set: the
// learning-rate range test's loss over log10(lr).
std::string svg_xy_chart(const std::vector<std::pair<std::string, std::vector<double>>>& series,
                         const std::vector<double>& xs, const std::string& title,
                         const std::string& x_label, const std::string& y_label,
                         std::optional<double> marker_x = std::nullopt,
                         const std::function<std::string(double)>& x_tick_text = nullptr);
// An axis tick's text, one style at every magnitude: "0", "0.25", "500", grouped thousands from
// 1000 ("10,000", "1,500,000"), and below 0.001 or from 1e9 scientific without printf's sign and
// padding ("5e-4", "2.5e9", never "1e+04").
std::string axis_tick_label(double v);
// A chart as a file of its own (.svg): an XML declaration, the chart styles the report page
// carries, and a white background.
std::string svg_document(const std::string& svg);
// The CSS of the charts' classes (title, tick, label, legend, value, grid, axis).
extern const char* const kChartStyle;

std::string html_report(const std::vector<ReportRun>& runs, const ReportInfo& info);

}  // namespace mantissa::train
