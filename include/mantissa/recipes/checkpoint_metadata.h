#pragma once
// The JSON a checkpoint or --save-weights file keeps in its safetensors metadata, read from its
// header (train::read_checkpoint_header) by the commands that must know a file before they
// build a model: eval's --checkpoint and train's --init-from. From the file, so checked before
// it is parsed or quoted (docs/design.md, "Untrusted files").
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/io/safetensors.h"

namespace mantissa::recipes {

// The metadata entry `key` parsed as JSON; `absent` when there is none. Nesting too deep or
// text that is not JSON is an error from `where` naming `path` and `what` (the entry).
nlohmann::json metadata_json(const std::map<std::string, std::string>& metadata,
                             const std::string& key, const std::string& path,
                             const std::string& what, const char* where, nlohmann::json absent);

// The "hyper_parameters" a file records: a Trainer checkpoint's in its trainer metadata, a
// --save-weights file's as its own metadata entry; {} for files written before mantissa stored
// them. A damaged entry is an error from `where` naming `path`. For `where` "--resume" (a
// resumed run, whose flags never replace a damaged record) the record is also checked by
// check_model_hparams_intact (model_hparams.h): a damaged value is eval's error, from --resume,
// advising an earlier checkpoint.
nlohmann::json recorded_model_hparams(const io::SafetensorsHeader& header, const std::string& path,
                                      const char* where);

}  // namespace mantissa::recipes
