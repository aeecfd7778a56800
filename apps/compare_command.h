#pragma once
// `mantissa compare`: trains the same model on the same data and seed once per precision and
// compares accuracy, loss, throughput and memory in a table, a JSON file and an HTML report.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "metrics.h"
#include "quant_options.h"

namespace mantissa::app {

struct CompareOptions {
  std::string model = "mlp";
  std::vector<std::string> precisions = {"32-true", "bf16-mixed", "16-mixed", "bf16-true"};
  int epochs = 2;
  int64_t batch_size = 256;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string hidden = "256";
  int threads = 0;
  int64_t train_subset = 0;
  std::string data_dir;
  std::string html;  // write the report here
  std::string json;  // write the results here
  std::map<std::string, std::string> precision_options;  // --fp8-* (apps/fp8_options.h)
  bool quiet = false;
  QuantOptions quant;  // nf4/fp4/int8 precisions and LoRA (quant_options.h)
};

// Runs every precision (canonical names, checked before the first run) in order.
std::vector<TrainMetrics> run_compare(const CompareOptions& options);

// The baseline the ratios refer to: 32-true when it ran, else the first precision.
size_t compare_baseline(const std::vector<TrainMetrics>& runs);

// The printed table (one row per precision).
std::string format_compare_table(const std::vector<TrainMetrics>& runs);

// The HTML report and the JSON document for the runs.
std::string compare_html(const CompareOptions& options, const std::vector<TrainMetrics>& runs);
std::string compare_json(const CompareOptions& options, const std::vector<TrainMetrics>& runs);

void add_compare_command(CLI::App& app);

}  // namespace mantissa::app
