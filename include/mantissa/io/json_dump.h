#pragma once
// JSON that mantissa writes (checkpoint metadata, config.json, hparams.yaml, safetensors
// headers) may hold text it did not choose: a file name such as a GPT's --text, which a run
// records, need not be UTF-8 (a Latin-1 name is legal on Linux).
#include <string>

#include <nlohmann/json.hpp>

namespace mantissa::io {

// value.dump(indent), bytes that are not UTF-8 written as U+FFFD: dump() itself throws
// nlohmann's type_error 316 there, which ended `mantissa train --checkpoint-dir` with "internal
// error" and no checkpoint.
template <class Json>
std::string dump_json(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace mantissa::io
