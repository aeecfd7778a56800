// TensorBoardLogger: one event file per logger, flushed after every record so TensorBoard
// shows the curves while training runs.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/report/logger.h"
#include "train/report/tfrecord.h"

namespace mantissa::train {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(const std::string& root_dir, const std::string& name,
                                     int64_t version)
    : log_dir_(resolve_log_dir(root_dir, name, version)) {
  const double now = wall_seconds();
  // TensorBoard finds event files by the "tfevents" in their name; the pid keeps two loggers
  // started in the same second apart.
  event_path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", log_dir_, static_cast<int64_t>(now),
                            host_name(), ::getpid());
  file_.open(event_path_, std::ios::binary | std::ios::trunc);
  MANTISSA_CHECK(file_.is_open(), "TensorBoardLogger", "cannot create '{}'", event_path_);
  write_record(tfrecord::encode_file_version_event(now, "brain.Event:2"));
}

TensorBoardLogger::~TensorBoardLogger() {
  if (file_.is_open()) file_.close();
}

void TensorBoardLogger::write_record(const std::string& payload) {
  if (!file_.is_open()) file_.open(event_path_, std::ios::binary | std::ios::app);
  file_ << tfrecord::frame_record(payload);
  file_.flush();
  MANTISSA_CHECK(file_.good(), "TensorBoardLogger", "writing '{}' failed", event_path_);
}

void TensorBoardLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  if (metrics.empty()) return;
  write_record(tfrecord::encode_scalars_event(wall_seconds(), step, metrics));
}

void TensorBoardLogger::log_hyperparams(const nlohmann::json& params) {
  MANTISSA_CHECK(params.is_object(), "TensorBoardLogger",
                 "hyperparameters must be a JSON object, got {}", params.type_name());
  hparams_.update(params);
  // Whole or not at all: an ofstream's failure (a full disk) went unseen and left the file
  // empty or cut.
  io::write_text_file_atomically(log_dir_ + "/hparams.yaml", to_yaml(hparams_),
                                 "TensorBoardLogger");
}

void TensorBoardLogger::finalize() {
  if (file_.is_open()) file_.close();
}

}  // namespace mantissa::train
