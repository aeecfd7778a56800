// CSVLogger: metrics.csv + hparams.yaml in <root>/<name>/version_N.
#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/report/logger.h"

namespace mantissa::train {
namespace {

// CSV quoting (RFC 4180): only when the field contains a separator, quote or newline.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

CSVLogger::CSVLogger(const std::string& root_dir, const std::string& name, int64_t version)
    : log_dir_(resolve_log_dir(root_dir, name, version)) {}

std::string CSVLogger::row_text(const std::map<std::string, double>& row) const {
  std::string line;
  for (const std::string& k : keys_) {
    auto it = row.find(k);
    if (it != row.end()) line += fmt::format("{}", it->second);  // shortest exact repr
    line += ',';
  }
  line += fmt::format("{}", static_cast<int64_t>(row.at("step")));
  return line + "\n";
}

void CSVLogger::rewrite() {
  if (file_.is_open()) file_.close();
  file_.open(metrics_path(), std::ios::trunc);
  MANTISSA_CHECK(file_.is_open(), "CSVLogger", "cannot write '{}'", metrics_path());
  std::string header;
  for (const std::string& k : keys_) header += csv_field(k) + ",";
  file_ << header << "step\n";
  for (const auto& row : rows_) file_ << row_text(row);
}

void CSVLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  bool new_key = false;
  for (const auto& [k, v] : metrics) {
    MANTISSA_CHECK(k != "step", "CSVLogger", "'step' is reserved for the step column ({})",
                   metrics_path());
    new_key |= keys_.insert(k).second;
  }
  std::map<std::string, double> row = metrics;
  row["step"] = static_cast<double>(step);
  rows_.push_back(std::move(row));
  if (new_key || !file_.is_open()) {
    rewrite();  // a wider header means every earlier row gains empty cells
  } else {
    file_ << row_text(rows_.back());
  }
  file_.flush();  // readable while training runs
  MANTISSA_CHECK(file_.good(), "CSVLogger", "writing '{}' failed", metrics_path());
}

void CSVLogger::log_hyperparams(const nlohmann::json& params) {
  MANTISSA_CHECK(params.is_object(), "CSVLogger", "hyperparameters must be a JSON object, got {}",
                 params.type_name());
  hparams_.update(params);
  // Whole or not at all: rewritten in place, a failed close (a full disk) would go unseen and
  // the earlier file would be lost.
  io::write_text_file_atomically(log_dir_ + "/hparams.yaml", to_yaml(hparams_), "CSVLogger");
}

void CSVLogger::finalize() {
  if (file_.is_open()) file_.close();
}

}  // namespace mantissa::train
