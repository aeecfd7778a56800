#include "mantissa/recipes/init_from_check.h"

#include <filesystem>
#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/tensor_sizes.h"
#include "mantissa/train/checkpoint.h"

namespace mantissa::recipes {

namespace {

// The hyperparameters `path` records against the run's flags; errors are tagged with `flag`.
void check_recorded_hparams(const std::string& path, const char* flag, const TrainOptions& o,
                            const GptOptions& g) {
  if (path.empty() || !std::filesystem::is_regular_file(path)) return;
  const io::SafetensorsHeader header = train::read_checkpoint_header(path);
  const nlohmann::json recorded = recorded_model_hparams(header, path, flag);
  if (!recorded.is_object()) return;  // damaged: the load's own checks name what does not fit
  TensorShapes shapes;
  for (const io::SafetensorsTensorInfo& t : header.tensors) shapes[t.name] = t.shape;
  // What eval does with flags given on its command line, every flag given: a key whose flag
  // must match the file (the model's shape, recipes/model_hparams.cpp) and does not is an
  // error there; a damaged value (wrong type, contradicted by the tensors) or a setting that
  // may differ (corpus, adapters) is not. One key at a time, --model first, so that the error
  // here names the flag the run has wrong.
  const nlohmann::json run = o.model == "gpt" ? gpt_model_hparams(o, g) : image_model_hparams(o);
  std::vector<std::string> keys;
  if (recorded.contains("model")) keys.push_back("model");
  for (const auto& [key, value] : recorded.items()) {
    if (key != "model") keys.push_back(key);
  }
  for (const std::string& key : keys) {
    TrainOptions o_copy = o;
    GptOptions g_copy = g;
    try {
      apply_model_hparams(
          nlohmann::json{{key, recorded.at(key)}}, path, shapes,
          [](const std::string&) { return true; }, o_copy, g_copy);
    } catch (const Error&) {
      // Only the head count leaves every tensor's shape as it is; any other size changes them.
      fail(flag, "{} was trained with --{} {}, but --{} is {} here: pass --{} {}{}", path, key,
           as_flag_value(recorded.at(key)), key,
           run.contains(key) ? as_flag_value(run.at(key)) : std::string("another value"), key,
           as_flag_value(recorded.at(key)),
           key == "heads" ? " (its weights would load into this model's shapes, and compute "
                            "something else)"
                          : " (its weights do not fit this model)");
    }
  }
}

}  // namespace

void check_init_from(const TrainOptions& o, const GptOptions& g) {
  check_recorded_hparams(o.quant.init_from, "--init-from", o, g);
}

void check_resume(const TrainOptions& o, const GptOptions& g) {
  check_recorded_hparams(o.resume, "--resume", o, g);
}

}  // namespace mantissa::recipes
