// The compare report page: header, table, charts and machine info in one HTML file.
#include "mantissa/train/report/html_report.h"

#include <fmt/format.h>

#include <cmath>

namespace mantissa::train {
namespace {

// Inline style only; system fonts so nothing is fetched.
constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 24px auto; max-width: 820px; color: #222; background: #fff; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.note { color: #555; font-size: 13px; }
p.warning { background: #fff4e5; border-left: 4px solid #e08a00; padding: 8px 10px;
            font-size: 14px; }
table { border-collapse: collapse; font-size: 14px; margin-top: 8px; }
th, td { padding: 5px 10px; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; white-space: nowrap; }
th { background: #f4f6f8; font-weight: 600; }
tr.baseline td { font-weight: 600; }
dl.settings { display: grid; grid-template-columns: max-content auto; gap: 2px 14px;
              font-size: 14px; }
dl.settings dt { color: #555; } dl.settings dd { margin: 0; }
pre.machine { background: #f6f8fa; padding: 10px; font-size: 12px; overflow-x: auto; }
svg.chart { display: block; margin: 10px 0; }
td.unreliable { color: #b35900; cursor: help; }
p.unreliable { color: #b35900; }
)";

std::string ratio_text(double r) { return std::isfinite(r) ? fmt::format("{:.2f}x", r) : "-"; }
// Samples/s, or "-" for a run that was not timed (a comparison interrupted before its timing
// rounds).
std::string speed_text(double v) { return std::isfinite(v) ? fmt::format("{:.0f}", v) : "-"; }

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string html_report(const std::vector<ReportRun>& runs, const ReportInfo& info) {
  const ReportRun* base = runs.empty() ? nullptr : &runs.front();
  for (const ReportRun& r : runs)
    if (r.precision == info.baseline) base = &r;

  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n",
      html_escape(info.title), std::string(kStyle) + kChartStyle);
  for (const std::string& w : info.warnings)
    h += "<p class=\"warning\">Warning: " + html_escape(w) + "</p>\n";
  if (!info.settings.empty()) {
    h += "<dl class=\"settings\">\n";
    for (const auto& [k, v] : info.settings)
      h += fmt::format("<dt>{}</dt><dd>{}</dd>\n", html_escape(k), html_escape(v));
    h += "</dl>\n";
  }

  h += "<h2>Results</h2>\n<table>\n<thead><tr><th>precision</th><th>test accuracy</th>"
       "<th>final loss</th><th>samples/s</th><th>speed-up</th><th>peak memory (MiB)</th>"
       "<th>memory</th><th>skipped steps</th></tr></thead>\n<tbody>\n";
  bool any_unreliable = false;
  for (const ReportRun& r : runs) {
    const double speedup = base ? r.samples_per_second / base->samples_per_second : NAN;
    const double mem = base ? r.peak_memory_bytes / base->peak_memory_bytes : NAN;
    any_unreliable |= r.speedup_unreliable;
    // The console's mark, with its meaning on hover and in the note under the table.
    const std::string speedup_cell =
        r.speedup_unreliable
            ? fmt::format("<td class=\"unreliable\" title=\"{}\">{}?</td>",
                          html_escape(info.unreliable_speedup_note), ratio_text(speedup))
            : fmt::format("<td>{}</td>", ratio_text(speedup));
    h += fmt::format(
        "<tr{}><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{}</td>{}"
        "<td>{:.1f}</td><td>{}</td><td>{}</td></tr>\n",
        &r == base ? " class=\"baseline\"" : "", html_escape(r.precision), r.test_accuracy,
        r.final_loss, speed_text(r.samples_per_second), speedup_cell,
        r.peak_memory_bytes / (1 << 20), ratio_text(mem),
        r.skipped_steps ? std::to_string(*r.skipped_steps) : "-");
  }
  h += "</tbody>\n</table>\n";
  if (any_unreliable && !info.unreliable_speedup_note.empty())
    h += "<p class=\"note unreliable\">" + html_escape(info.unreliable_speedup_note) + "</p>\n";
  if (base)
    h += fmt::format(
        "<p class=\"note\">Speed-up and memory are relative to {}. Throughput is measured on "
        "whatever else the machine was running at the time; compare runs from one report.</p>\n",
        html_escape(base->precision));

  std::vector<std::pair<std::string, std::vector<double>>> curves;
  std::vector<std::pair<std::string, double>> speed, memory;
  for (const ReportRun& r : runs) {
    curves.emplace_back(r.precision, r.step_losses);
    speed.emplace_back(r.precision, r.samples_per_second);
    memory.emplace_back(r.precision, r.peak_memory_bytes / (1 << 20));
  }
  h += "<h2>Training loss</h2>\n" +
       svg_line_chart(curves, "Training loss per step", "optimizer step", "loss");
  if (runs.size() > 1)
    h += "<p class=\"note\">Curves that coincide hide each other (drawn in table order); that "
         "is the expected result when a precision trains like the baseline.</p>\n";
  h += "<h2>Throughput</h2>\n" + svg_bar_chart(speed, "Training throughput", "samples/s");
  h += "<h2>Memory</h2>\n" + svg_bar_chart(memory, "Peak training memory", "MiB");
  if (!info.machine.empty())
    h += "<h2>Machine</h2>\n<pre class=\"machine\">" + html_escape(info.machine) + "</pre>\n";
  return h + "</body>\n</html>\n";
}

}  // namespace mantissa::train
