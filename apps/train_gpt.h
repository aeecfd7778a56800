#pragma once
// `mantissa train --model gpt`: a byte-level GPT on a text corpus, trained for a number of
// optimizer steps (not epochs) with AdamW, warm-up and cosine decay, gradient clipping, a
// periodic validation loss in nats per character, and a sample at the end.
#include <cstdint>
#include <string>

#include "metrics.h"
#include "train_loop.h"

namespace mantissa::app {

struct GptOptions {
  int64_t max_steps = 2000;
  std::string text;  // corpus file or directory; "" = the `fortunes` package's cookie files
  int64_t layers = 6;
  int64_t width = 256;
  int64_t heads = 8;
  int64_t context = 128;
  double dropout = 0.0;
  bool tie_embeddings = true;
  int64_t warmup_steps = 100;
  int64_t eval_interval = 250;  // validation every this many steps, and after the last
  int64_t eval_batches = 16;    // validation windows: eval_batches * batch_size
  std::string sample_prompt = "The ";
  int64_t sample_tokens = 300;
  double temperature = 0.8;
  int64_t top_k = 40;
  // Write the trained model's state dict here (safetensors, keys "model.<name>"), e.g. to
  // fine-tune it later with --init-from.
  std::string save_weights;
};

// Uses from `o`: precision, batch_size, lr (peak), weight_decay, seed, threads, metrics_json,
// quiet. Returns the metrics (val_loss_nats_per_char, tokens_per_second, the validation
// curve, the sample) and writes them to o.metrics_json when set.
TrainMetrics run_gpt_training(const TrainOptions& o, const GptOptions& g);

}  // namespace mantissa::app
