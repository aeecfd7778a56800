// HTML report structure: one polyline per run with one point per finite step, bar heights
// proportional to the values, names escaped, nothing fetched from the network.
#include "mantissa/train/report/html_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace mantissa::train {
namespace {

std::vector<std::string> all_matches(const std::string& s, const std::string& re) {
  std::vector<std::string> out;
  const std::regex r(re);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), r); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

std::vector<std::pair<double, double>> points(const std::string& attr) {
  std::vector<std::pair<double, double>> out;
  const std::regex r(R"(([-0-9.]+),([-0-9.]+))");
  for (auto it = std::sregex_iterator(attr.begin(), attr.end(), r); it != std::sregex_iterator();
       ++it)
    out.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  return out;
}

TEST(HtmlReport, Escape) {
  EXPECT_EQ(html_escape(R"(<a href="x">Tom & 'Jerry'</a>)"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
}

TEST(HtmlReport, LineChartPointsPerStep) {
  const std::vector<double> a = {2.0, 1.5, 1.0, 0.5, 0.25};
  const std::vector<double> b = {2.0, NAN, 1.0, INFINITY, 0.5, 0.4, 0.3};
  const std::string svg = svg_line_chart({{"fp32", a}, {"fp16", b}}, "loss", "step", "loss");
  const auto pts = all_matches(svg, R"re(<polyline[^>]* points="([^"]*)")re");
  ASSERT_EQ(pts.size(), 2u);
  const auto pa = points(pts[0]), pb = points(pts[1]);
  EXPECT_EQ(pa.size(), a.size());
  EXPECT_EQ(pb.size(), 5u);  // the two non-finite steps are not drawn
  // x grows with the step; y is linear in the loss (SVG y points down).
  for (size_t i = 1; i < pa.size(); ++i) {
    EXPECT_GT(pa[i].first, pa[i - 1].first);
    EXPECT_GT(pa[i].second, pa[i - 1].second);
  }
  const double dy_per_loss = (pa[4].second - pa[0].second) / (0.25 - 2.0);
  EXPECT_NEAR((pa[2].second - pa[0].second) / (1.0 - 2.0), dy_per_loss, 0.2);
  // Same step index, same x in both series; same loss, same y.
  EXPECT_NEAR(pb[0].first, pa[0].first, 1e-9);
  EXPECT_NEAR(pb[1].first, pa[2].first, 1e-9);  // step 2 of b (after the NaN one)
  EXPECT_NEAR(pb[1].second, pa[2].second, 1e-9);
  EXPECT_EQ(count(svg, "<svg "), 1u);
  EXPECT_EQ(count(svg, "</svg>"), 1u);
}

TEST(HtmlReport, BarHeightsProportional) {
  const std::string svg =
      svg_bar_chart({{"32-true", 1000}, {"bf16-mixed", 2500}, {"bf16-true", 500}}, "speed", "s/s");
  const auto heights = all_matches(svg, R"re(<rect class="bar"[^>]* height="([0-9.]+)")re");
  ASSERT_EQ(heights.size(), 3u);
  const double h0 = std::stod(heights[0]), h1 = std::stod(heights[1]), h2 = std::stod(heights[2]);
  EXPECT_GT(h0, 10);
  EXPECT_NEAR(h1 / h0, 2.5, 1e-3);
  EXPECT_NEAR(h2 / h0, 0.5, 1e-3);
  // Bars stand on one baseline: y + height is the same for all.
  const auto ys = all_matches(svg, R"re(<rect class="bar"[^>]* y="([0-9.]+)")re");
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_NEAR(std::stod(ys[0]) + h0, std::stod(ys[1]) + h1, 1e-2);
  EXPECT_NEAR(std::stod(ys[2]) + h2, std::stod(ys[1]) + h1, 1e-2);
}

// Tick labels read the same way at every magnitude: grouped thousands, never printf's "1e+04".
TEST(HtmlReport, AxisTickLabelsAreReadable) {
  EXPECT_EQ(axis_tick_label(0), "0");
  EXPECT_EQ(axis_tick_label(0.25), "0.25");
  EXPECT_EQ(axis_tick_label(0.001), "0.001");
  EXPECT_EQ(axis_tick_label(500), "500");
  EXPECT_EQ(axis_tick_label(1000), "1,000");
  EXPECT_EQ(axis_tick_label(2500), "2,500");
  EXPECT_EQ(axis_tick_label(10000), "10,000");
  EXPECT_EQ(axis_tick_label(-20000), "-20,000");
  EXPECT_EQ(axis_tick_label(1500000), "1,500,000");
  EXPECT_EQ(axis_tick_label(1250.5), "1,250.5");
  EXPECT_EQ(axis_tick_label(99999.99999), "100,000");
  EXPECT_EQ(axis_tick_label(1e9), "1e9");
  EXPECT_EQ(axis_tick_label(2.5e9), "2.5e9");
  EXPECT_EQ(axis_tick_label(9.9999e9), "1e10");
  EXPECT_EQ(axis_tick_label(5e-4), "5e-4");
  EXPECT_EQ(axis_tick_label(-2.5e-5), "-2.5e-5");
}

// The charts use them: a throughput of tens of thousands of samples/s is labelled "10,000"
// and its bar "24,500", a loss curve of 12000 steps "2,000" ... on the step axis.
TEST(HtmlReport, ChartsLabelLargeValuesReadably) {
  const std::string bars =
      svg_bar_chart({{"32-true", 12000}, {"bf16-true", 24500}}, "Training throughput", "samples/s");
  EXPECT_NE(bars.find(">10,000</text>"), std::string::npos) << bars;
  EXPECT_NE(bars.find(">24,500</text>"), std::string::npos) << bars;
  std::vector<double> losses(12000);
  for (size_t i = 0; i < losses.size(); ++i) losses[i] = 2.0 / (1.0 + static_cast<double>(i));
  const std::string line = svg_line_chart({{"32-true", losses}}, "loss", "step", "loss");
  EXPECT_NE(line.find(">2,000</text>"), std::string::npos) << line.substr(0, 2000);
  for (const std::string* svg : {&bars, &line}) {
    EXPECT_EQ(svg->find("e+"), std::string::npos);
    EXPECT_EQ(svg->find(">1e4<"), std::string::npos);
  }
}

// A speed-up marked unreliable carries the console's "?" and its explanation, on hover and in a
// note under the table; an unmarked one has neither.
TEST(HtmlReport, UnreliableSpeedUpIsMarked) {
  std::vector<ReportRun> runs = {
      {.precision = "32-true", .samples_per_second = 1000, .peak_memory_bytes = 8 << 20},
      {.precision = "bf16-true",
       .samples_per_second = 500,
       .peak_memory_bytes = 4 << 20,
       .speedup_unreliable = true}};
  ReportInfo info;
  info.baseline = "32-true";
  info.unreliable_speedup_note = "?: its timing rounds differ & more";
  std::string html = html_report(runs, info);
  EXPECT_NE(html.find("<td>1.00x</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"unreliable\" title=\"?: its timing rounds differ &amp; "
                      "more\">0.50x?</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<p class=\"note unreliable\">?: its timing rounds differ &amp; more</p>"),
            std::string::npos);
  runs[1].speedup_unreliable = false;
  html = html_report(runs, info);
  EXPECT_EQ(html.find("x?"), std::string::npos);
  EXPECT_EQ(html.find("its timing rounds"), std::string::npos);
}

TEST(HtmlReport, WholePage) {
  std::vector<ReportRun> runs = {
      {.precision = "32-true",
       .step_losses = {2.3, 1.2, 0.9},
       .test_accuracy = 0.8,
       .final_loss = 0.9,
       .samples_per_second = 1000,
       .peak_memory_bytes = 8 << 20,
       .skipped_steps = std::nullopt},
      {.precision = "<b>16-mixed</b>",
       .step_losses = {2.3, 1.1, 0.8},
       .test_accuracy = 0.81,
       .final_loss = 0.8,
       .samples_per_second = 1500,
       .peak_memory_bytes = 6 << 20,
       .skipped_steps = 3},
  };
  ReportInfo info;
  info.title = "A & B";
  info.baseline = "32-true";
  info.settings = {{"epochs", "2"}};
  info.machine = "avx512f: yes";
  const std::string html = html_report(runs, info);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(html.ends_with("</html>\n"));
  EXPECT_EQ(count(html, "<title>A &amp; B</title>"), 1u);
  EXPECT_EQ(count(html, "<polyline"), 2u);
  EXPECT_EQ(count(html, "<rect class=\"bar\""), 4u);  // throughput + memory
  EXPECT_EQ(count(html, "<svg "), 3u);
  // Escaped everywhere: table, legend, bar labels; never raw.
  EXPECT_EQ(count(html, "<b>16-mixed</b>"), 0u);
  EXPECT_GE(count(html, "&lt;b&gt;16-mixed&lt;/b&gt;"), 4u);
  // Table rows: speed-up 1.50x and memory 0.75x against the baseline; skipped steps shown.
  EXPECT_NE(html.find("<td>1500</td><td>1.50x</td><td>6.0</td><td>0.75x</td><td>3</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<tr class=\"baseline\"><td>32-true</td><td>0.8000</td>"), std::string::npos);
  EXPECT_NE(html.find("<pre class=\"machine\">avx512f: yes</pre>"), std::string::npos);
  // Self-contained: no scripts, no external resources.
  EXPECT_EQ(count(html, "<script"), 0u);
  EXPECT_EQ(count(html, "http://"), count(html, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(count(html, "https://"), 0u);
  EXPECT_EQ(count(html, "<link"), 0u);
}

}  // namespace
}  // namespace mantissa::train
