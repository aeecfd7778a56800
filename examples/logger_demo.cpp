// Writes a CSV and a TensorBoard log with known values, for scripts/tensorboard_check.py (which
// reads the event file with the tensorboard package) and as a usage example of the loggers.
//   build/example_logger_demo DIR
#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/train/report/logger.h"

using namespace mantissa;

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} DIR\n", argv[0]);
    return 2;
  }
  try {
    train::CSVLogger csv(argv[1], "demo");
    train::TensorBoardLogger tb(argv[1], "demo");
    for (train::Logger* logger :
         {static_cast<train::Logger*>(&csv), static_cast<train::Logger*>(&tb)}) {
      logger->log_hyperparams({{"lr", 0.001}, {"precision", "bf16-mixed"}});
      // step s: train_loss = 1 / (s + 1); every 5th step also val_acc = 0.5 + s / 100.
      for (int s = 0; s < 20; ++s) {
        std::map<std::string, double> m = {{"train_loss", 1.0 / (s + 1)}};
        if (s % 5 == 4) m["val_acc"] = 0.5 + s / 100.0;
        logger->log_metrics(m, s);
      }
      logger->finalize();
    }
    fmt::print("{}\n{}\n", csv.log_dir(), tb.event_file());
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
