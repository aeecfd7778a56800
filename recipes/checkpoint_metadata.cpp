#include "mantissa/recipes/checkpoint_metadata.h"

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/train/checkpoint/checkpoint.h"

namespace mantissa::recipes {

nlohmann::json metadata_json(const std::map<std::string, std::string>& metadata,
                             const std::string& key, const std::string& path,
                             const std::string& what, const char* where, nlohmann::json absent) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return absent;
  io::check_json_nesting(it->second, where, path + ": " + what);
  try {
    // A repeated key is damage: which value counts is not defined.
    return io::parse_json_refusing_duplicate_keys(it->second, where, path + ": " + what);
  } catch (const nlohmann::json::exception& e) {
    // The parser's message quotes the bytes it stopped at: from the file, so escaped.
    fail(where, "{}: {} is not valid JSON ({}); the file is damaged", path, what,
         escape_untrusted(e.what(), 300));
  }
}

nlohmann::json recorded_model_hparams(const io::SafetensorsHeader& header, const std::string& path,
                                      const char* where) {
  const nlohmann::json meta = metadata_json(header.metadata, train::kCheckpointMetadataKey, path,
                                            "the trainer metadata", where, nullptr);
  if (meta.is_null()) {
    return metadata_json(header.metadata, "hyper_parameters", path, "hyper_parameters", where,
                         nlohmann::json::object());
  }
  if (meta.is_object() && meta.contains("hyper_parameters")) return meta.at("hyper_parameters");
  return nlohmann::json::object();
}

}  // namespace mantissa::recipes
