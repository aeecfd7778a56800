// Inline SVG charts: a multi-series line chart and a labelled bar chart, with "nice" axis ticks.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "mantissa/train/report/html_report.h"

namespace mantissa::train {
namespace {

// Distinct colours that stay apart for colour-blind readers (Okabe-Ito).
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kWidth = 760, kHeight = 360;
constexpr int kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;

// Ticks at 1, 2 or 5 times a power of ten covering [lo, hi] with about `count` steps.
std::vector<double> nice_ticks(double lo, double hi, int count, double min_step = 0) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = std::max((hi - lo) / count, min_step);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step + 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string num(double v) { return fmt::format("{:.1f}", v); }

// Digits of a whole number in groups of three: 1234567 -> "1,234,567".
std::string grouped(double whole) {
  std::string digits = fmt::format("{:.0f}", std::abs(whole));
  for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return (whole < 0 ? "-" : "") + digits;
}

// Bar labels: whole numbers from 100 up, grouped as the axis (samples/s), three significant
// digits below (MiB).
std::string value_label(double v) {
  if (!std::isfinite(v)) return "-";
  return std::abs(v) >= 100 ? grouped(std::round(v)) : fmt::format("{:.3g}", v);
}

std::string svg_open(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">\n"
      "<text class=\"title\" x=\"{3}\" y=\"22\" text-anchor=\"middle\">{2}</text>\n",
      kWidth, kHeight, html_escape(title), kLeft + (kWidth - kLeft - kRight) / 2);
}

// The series drawn over shared x positions (point i of every series at xs[i]; NaN/inf values
// are left out), with y ticks over the data, the given x ticks and their labels, and a dashed
// vertical line at marker_x when set.
std::string xy_chart(const std::vector<std::pair<std::string, std::vector<double>>>& series,
                     const std::vector<double>& xs, const std::vector<double>& x_ticks,
                     const std::function<std::string(double)>& x_tick_text,
                     const std::string& title, const std::string& x_label,
                     const std::string& y_label, std::optional<double> marker_x) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& [name, ys] : series) {
    for (double y : ys)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
  for (double x : xs) x0 = std::min(x0, x), x1 = std::max(x1, x);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (!(x1 > x0)) x1 = x0 + 1;
  const std::vector<double> yt = nice_ticks(lo, hi, 5);
  const double y0 = std::min(lo, yt.front()), y1 = std::max(hi, yt.back());
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (y1 - y) / (y1 - y0 > 0 ? y1 - y0 : 1) * ph; };

  std::string s = svg_open(title);
  for (double t : yt) {  // horizontal grid lines with labels
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, num(kLeft + pw), num(py(t)), kLeft - 6, num(py(t) + 4), axis_tick_label(t));
  }
  for (double t : x_ticks) {
    if (t < x0 - 1e-9 * (x1 - x0) || t > x1 + 1e-9 * (x1 - x0)) continue;
    s += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     num(px(t)), kTop + ph + 18, html_escape(x_tick_text(t)));
  }
  s += fmt::format(
      "<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
      "<line class=\"axis\" x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>\n",
      kLeft, kTop, num(kTop + ph), num(kLeft + pw));
  s += fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   num(kLeft + pw / 2), kHeight - 10, html_escape(x_label));
  s += fmt::format(
      "<text class=\"label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      num(kTop + ph / 2), html_escape(y_label));
  if (marker_x) {
    s += fmt::format(
        "<line class=\"marker\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#444\" "
        "stroke-dasharray=\"4 3\"/>\n",
        num(px(*marker_x)), kTop, num(kTop + ph));
  }
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& [name, ys] = series[k];
    const char* color = kColors[k % std::size(kColors)];
    std::string pts;
    for (size_t i = 0; i < ys.size() && i < xs.size(); ++i) {
      if (!std::isfinite(ys[i])) continue;  // overflowed fp16 steps have no loss to draw
      if (!pts.empty()) pts += ' ';
      pts += num(px(xs[i])) + ',' + num(py(ys[i]));
    }
    s += fmt::format(
        "<polyline class=\"series\" data-name=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"1.5\" stroke-opacity=\"0.85\" stroke-linejoin=\"round\" points=\"{}\"/>\n",
        html_escape(name), color, pts);
    const double ly = kTop + 10 + 22.0 * static_cast<double>(k);
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"3\"/>"
        "<text class=\"legend\" x=\"{4}\" y=\"{5}\">{6}</text>\n",
        kWidth - kRight + 14, kWidth - kRight + 38, num(ly), color, kWidth - kRight + 44,
        num(ly + 4), html_escape(name));
  }
  return s + "</svg>\n";
}

}  // namespace

std::string axis_tick_label(double v) {
  if (v == 0 || !std::isfinite(v)) return v == 0 ? "0" : fmt::format("{}", v);
  const double a = std::abs(v);
  if (a >= 1e9 || a < 1e-3) {
    // Scientific as a reader writes it: "1e9", "2.5e-5" (printf's "1e+09" spelled out).
    const int exp = static_cast<int>(std::floor(std::log10(a)));
    double mant = v / std::pow(10.0, exp);
    int e = exp;
    if (std::abs(std::round(mant * 100) / 100) >= 10) mant /= 10, ++e;  // 9.999e4 -> 1e5
    return fmt::format("{:g}e{}", std::round(mant * 100) / 100, e);
  }
  if (a >= 1000) {
    // Thousands grouped, a fraction (rare at nice ticks) kept: "10,000", "1,250.5".
    const double whole = std::trunc(v);
    const double frac = std::round(std::abs(v - whole) * 1e3) / 1e3;
    if (frac == 0 || frac == 1) return grouped(whole + (frac == 1 ? (v < 0 ? -1 : 1) : 0));
    return grouped(whole) + fmt::format("{:g}", frac).substr(1);  // "0.5" -> ".5"
  }
  return fmt::format("{:g}", std::round(v * 1e6) / 1e6);
}

std::string svg_line_chart(const std::vector<std::pair<std::string, std::vector<double>>>& series,
                           const std::string& title, const std::string& x_label,
                           const std::string& y_label) {
  size_t max_n = 1;
  for (const auto& [name, ys] : series) max_n = std::max(max_n, ys.size());
  // Point i is step i + 1; ticks at whole steps.
  std::vector<double> xs(max_n);
  for (size_t i = 0; i < max_n; ++i) xs[i] = static_cast<double>(i + 1);
  if (max_n == 1) xs.push_back(2);  // one point: the axis still spans a step
  return xy_chart(series, xs, nice_ticks(1, static_cast<double>(max_n), 6, 1), axis_tick_label,
                  title, x_label, y_label, std::nullopt);
}

std::string svg_xy_chart(const std::vector<std::pair<std::string, std::vector<double>>>& series,
                         const std::vector<double>& xs, const std::string& title,
                         const std::string& x_label, const std::string& y_label,
                         std::optional<double> marker_x,
                         const std::function<std::string(double)>& x_tick_text) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
  for (double x : xs) x0 = std::min(x0, x), x1 = std::max(x1, x);
  const std::vector<double> ticks =
      std::isfinite(x0) ? nice_ticks(x0, x1, 6) : std::vector<double>{};
  return xy_chart(series, xs, ticks, x_tick_text ? x_tick_text : axis_tick_label, title, x_label,
                  y_label, marker_x);
}

const char* const kChartStyle = R"(
svg .title { font-size: 15px; font-weight: 600; fill: #222; }
svg .tick { font-size: 11px; fill: #555; }
svg .label { font-size: 12px; fill: #333; }
svg .legend { font-size: 12px; fill: #222; }
svg .value { font-size: 12px; fill: #222; }
svg .grid { stroke: #e8e8e8; stroke-width: 1; }
svg .axis { stroke: #888; stroke-width: 1; }
)";

std::string svg_document(const std::string& svg) {
  // A chart in a file of its own carries the report's chart styles (html_report.cpp's kStyle
  // holds them for the page).
  const size_t open_end = svg.find(">\n");
  if (open_end == std::string::npos) return svg;
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg.substr(0, open_end + 2) + "<style>" +
         std::string(kChartStyle) + "</style>\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + svg.substr(open_end + 2);
}

std::string svg_bar_chart(const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& title, const std::string& unit) {
  double hi = 0;
  for (const auto& [name, v] : bars)
    if (std::isfinite(v)) hi = std::max(hi, v);
  // 12% headroom keeps the value label of the tallest bar clear of the title.
  const std::vector<double> yt = nice_ticks(0, hi > 0 ? hi * 1.12 : 1, 5);
  const double top = std::max(hi * 1.12, yt.back());
  const double pw = kWidth - kLeft - kRight / 2, ph = kHeight - kTop - kBottom;
  std::string s = svg_open(title);
  for (double t : yt)
    s += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, num(kLeft + pw), num(kTop + ph - t / top * ph), kLeft - 6,
        num(kTop + ph - t / top * ph + 4), axis_tick_label(t));
  s += fmt::format(
      "<text class=\"label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      num(kTop + ph / 2), html_escape(unit));
  const double slot = pw / static_cast<double>(std::max<size_t>(bars.size(), 1));
  const double bw = std::min(90.0, slot * 0.6);
  for (size_t k = 0; k < bars.size(); ++k) {
    const auto& [name, v] = bars[k];
    const double value = std::isfinite(v) && v > 0 ? v : 0;
    const double h = value / top * ph;  // proportional to the value, from zero
    const double x = kLeft + slot * (static_cast<double>(k) + 0.5) - bw / 2;
    s += fmt::format(
        "<rect class=\"bar\" data-name=\"{}\" data-value=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
        "height=\"{}\" fill=\"{}\"/>\n",
        html_escape(name), value_label(v), num(x), fmt::format("{:.3f}", kTop + ph - h), num(bw),
        fmt::format("{:.3f}", h), kColors[k % std::size(kColors)]);
    s += fmt::format(
        "<text class=\"value\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        num(x + bw / 2), num(kTop + ph - h - 6), value_label(v), num(x + bw / 2), kTop + ph + 18,
        html_escape(name));
  }
  s += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", kLeft,
                   num(kLeft + pw), num(kTop + ph));
  return s + "</svg>\n";
}

}  // namespace mantissa::train
