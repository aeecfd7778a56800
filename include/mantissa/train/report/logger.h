#pragma once
// Experiment loggers (Lightning's CSVLogger and TensorBoardLogger). Each logger owns one
// directory <root_dir>/<name>/version_<N>; N defaults to the next free number so runs never
// overwrite each other.
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace mantissa::train {

class Logger {
 public:
  virtual ~Logger() = default;
  // One row of scalar metrics (e.g. {"train_loss": 0.41, "lr": 1e-3}) at a global step.
  virtual void log_metrics(const std::map<std::string, double>& metrics, int64_t step) = 0;
  // Hyperparameters (a JSON object); later calls merge into earlier ones.
  virtual void log_hyperparams(const nlohmann::json& params) = 0;
  // Flushes and closes files; the logger stays usable (a later call reopens them).
  virtual void finalize() {}
  virtual std::string log_dir() const = 0;
};

// The next unused N for <root_dir>/<name>/version_N (0 when there is none yet).
int64_t next_version(const std::string& root_dir, const std::string& name);

// The directory a logger uses: <root>/<name>/version_<version or next free one>.
std::string resolve_log_dir(const std::string& root_dir, const std::string& name, int64_t version);

// hparams.yaml content for a JSON object (JSON scalars are valid YAML; nesting is indented).
std::string to_yaml(const nlohmann::json& value);

// metrics.csv with one column per metric ever seen (sorted, "step" last) and one row per
// log_metrics call; a cell is empty where a row lacks that metric. When a new metric appears the
// file is rewritten with the wider header, as Lightning does. hparams.yaml next to it.
class CSVLogger : public Logger {
 public:
  explicit CSVLogger(const std::string& root_dir, const std::string& name = "lightning_logs",
                     int64_t version = -1);
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_hyperparams(const nlohmann::json& params) override;
  void finalize() override;
  std::string log_dir() const override { return log_dir_; }
  std::string metrics_path() const { return log_dir_ + "/metrics.csv"; }

 private:
  void rewrite();
  std::string row_text(const std::map<std::string, double>& row) const;

  std::string log_dir_;
  std::set<std::string> keys_;  // metric columns; "step" is appended after them
  std::vector<std::map<std::string, double>> rows_;  // kept to rewrite on a new column
  std::ofstream file_;
  nlohmann::json hparams_ = nlohmann::json::object();
};

// Writes TensorBoard event files (events.out.tfevents.<time>.<host>.<pid>): TFRecord framing
// around hand-encoded Event protobufs, one scalar summary value per metric.
class TensorBoardLogger : public Logger {
 public:
  explicit TensorBoardLogger(const std::string& root_dir,
                             const std::string& name = "lightning_logs", int64_t version = -1);
  ~TensorBoardLogger() override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  // TensorBoard's hparams plugin needs a separate protobuf schema; the values go to hparams.yaml
  // in the log directory (as Lightning also does).
  void log_hyperparams(const nlohmann::json& params) override;
  void finalize() override;
  std::string log_dir() const override { return log_dir_; }
  std::string event_file() const { return event_path_; }

 private:
  void write_record(const std::string& payload);

  std::string log_dir_;
  std::string event_path_;
  std::ofstream file_;
  nlohmann::json hparams_ = nlohmann::json::object();
};

}  // namespace mantissa::train
