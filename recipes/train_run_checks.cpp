// `mantissa train`'s checks of a run's own files and sizes (see train_run_checks.h).
#include "mantissa/recipes/train_run_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/io/output_path.h"

namespace mantissa::recipes {

void check_train_run(const TrainOptions& o, const GptOptions& g, bool init_from_given) {
  // (Given empty, it is refused with every flag's empty value: flag_value_checks.h.)
  if (init_from_given) {
    const std::string& from = o.quant.init_from;
    // A directory (the run's --checkpoint-dir, given instead of a file in it) is named as
    // such, with the file meant, as --resume and eval do; "no such file" misled there.
    MANTISSA_CHECK(!std::filesystem::is_directory(from), "train",
                   "--init-from {}: is a directory; give a checkpoint such as "
                   "{}/last.safetensors",
                   escape_untrusted(from), escape_untrusted(from));
    MANTISSA_CHECK(std::filesystem::exists(from), "train",
                   "--init-from {}: no such file (give a checkpoint of an earlier run, such as "
                   "the last.safetensors of its --checkpoint-dir)",
                   escape_untrusted(from));
    // A FIFO or a device was "no such file" too.
    MANTISSA_CHECK(std::filesystem::is_regular_file(from), "train",
                   "--init-from {}: is not a regular file (a device, FIFO or socket); give a "
                   "checkpoint of an earlier run, such as the last.safetensors of its "
                   "--checkpoint-dir",
                   escape_untrusted(from));
  }
  if (!g.save_weights.empty()) {
    MANTISSA_CHECK(o.model == "gpt", "train",
                   "--save-weights applies to --model gpt only; an image model's weights are "
                   "in the checkpoints of --checkpoint-dir, which eval and --init-from read");
    if (dist::world()->is_global_zero()) io::check_output_file(g.save_weights, "--save-weights");
  }
  // Checked here, in the flags' names: the Trainer and the GPT refuse these too, but name
  // their own fields ("[Trainer] accumulate_grad_batches", "[GPT] width 64 must be divisible
  // by heads 3"), which a command-line user never typed.
  MANTISSA_CHECK(o.accumulate_grad_batches >= 1, "train",
                 "--accumulate-grad-batches must be at least 1 (1: a step per batch), got {}",
                 o.accumulate_grad_batches);
  MANTISSA_CHECK(std::isfinite(o.gradient_clip_val) && o.gradient_clip_val >= 0, "train",
                 "--gradient-clip-val must be 0 (no clipping) or a positive norm or value, got "
                 "{}",
                 o.gradient_clip_val);
  if (o.model == "gpt") {
    MANTISSA_CHECK(g.heads >= 1 && g.width >= 1, "train",
                   "--width and --heads must be at least 1, got --width {} --heads {}", g.width,
                   g.heads);
    if (g.width % g.heads != 0) {
      // The head counts nearest the one given that do divide --width.
      int64_t below = g.heads - 1, above = g.heads + 1;
      while (g.width % below != 0) --below;  // stops at 1
      while (above <= g.width && g.width % above != 0) ++above;
      fail("train",
           "--width {} must be divisible by --heads {} (each head takes width / heads of the "
           "embedding): use --heads {}{}, or another --width",
           g.width, g.heads, below,
           above <= g.width ? fmt::format(" or {}", above) : std::string());
    }
  }
}

}  // namespace mantissa::recipes
