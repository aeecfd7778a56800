#include "mantissa/models/hf_weights.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::models {

namespace {

constexpr const char* kWhere = "hf_loader";
namespace fs = std::filesystem;

std::string read_small_text(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  MANTISSA_CHECK(fs::is_regular_file(path, ec), kWhere, "'{}' is not a regular file", path);
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  MANTISSA_CHECK(!ec && size <= max_bytes, kWhere, "'{}': {} bytes is too large for an index", path,
                 size);
  std::ifstream in(path, std::ios::binary);
  MANTISSA_CHECK(in.good(), kWhere, "cannot open '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shard files of an index, in order of first mention, and its tensor -> shard map.
std::vector<std::pair<std::string, std::string>> read_index(const std::string& path) {
  const std::string text = read_small_text(path, 64 << 20);
  nlohmann::json j = io::parse_untrusted_json(text, kWhere, "'" + path + "'");
  MANTISSA_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), kWhere,
                 "'{}': expected an object with a 'weight_map' object", path);
  std::vector<std::pair<std::string, std::string>> map;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    MANTISSA_CHECK(it.value().is_string(), kWhere, "'{}': weight_map[{}] must be a file name", path,
                   quote_untrusted(it.key()));
    const std::string shard = it.value().get<std::string>();
    // A shard is a file beside the index: no folders, no way out of the directory.
    MANTISSA_CHECK(!shard.empty() && shard.find('/') == std::string::npos &&
                       shard.find('\\') == std::string::npos && shard != "." && shard != "..",
                   kWhere, "'{}': weight_map[{}] names {}, not a file in the model directory", path,
                   quote_untrusted(it.key()), quote_untrusted(shard));
    map.emplace_back(it.key(), shard);
  }
  return map;
}

}  // namespace

HfWeights::HfWeights(const std::string& model_dir) : dir_(model_dir) {
  const fs::path dir(model_dir);
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  auto add = [&](const fs::path& p) {
    files_.push_back(std::make_unique<io::MappedSafetensors>(p.string()));
    return files_.size() - 1;
  };
  if (fs::exists(index, ec)) {
    const auto map = read_index(index.string());
    std::unordered_map<std::string, size_t> shard_index;
    for (const auto& [tensor, shard] : map) {
      if (shard_index.count(shard)) continue;
      const fs::path p = dir / shard;
      MANTISSA_CHECK(fs::exists(p, ec), kWhere, "'{}' names shard {}, which is missing from {}",
                     index.string(), quote_untrusted(shard), quote_untrusted(model_dir));
      shard_index[shard] = add(p);
    }
    std::set<std::string> listed;
    for (const auto& [tensor, shard] : map) {
      const size_t f = shard_index.at(shard);
      MANTISSA_CHECK(files_[f]->find(tensor) != nullptr, kWhere,
                     "'{}' puts tensor {} in '{}', which has no such tensor", index.string(),
                     quote_untrusted(tensor), files_[f]->path());
      listed.insert(tensor);
      where_[tensor] = f;
      names_.push_back(tensor);
    }
    for (const auto& file : files_)
      for (const auto& t : file->tensors())
        MANTISSA_CHECK(listed.count(t.name), kWhere,
                       "'{}' holds tensor {}, which '{}' does not list", file->path(),
                       quote_untrusted(t.name), index.string());
  } else if (fs::exists(single, ec)) {
    add(single);
    for (const auto& t : files_[0]->tensors()) {
      where_[t.name] = 0;
      names_.push_back(t.name);
    }
  } else {
    const bool pickled = fs::exists(dir / "pytorch_model.bin", ec) ||
                         fs::exists(dir / "pytorch_model.bin.index.json", ec);
    fail(kWhere, "{} has no model.safetensors or model.safetensors.index.json{}",
         quote_untrusted(model_dir),
         pickled ? " (pytorch_model.bin files are pickles, which mantissa does not read; convert "
                   "them to safetensors)"
                 : "");
  }
}

const io::MappedSafetensors& HfWeights::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  MANTISSA_CHECK(it != where_.end(), kWhere, "the weights in {} have no tensor {}",
                 quote_untrusted(dir_), quote_untrusted(name));
  return *files_[it->second];
}

const io::SafetensorsTensorInfo& HfWeights::info(const std::string& name) const {
  return file_of(name).at(name);
}

std::vector<std::string> HfWeights::paths() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->path());
  return out;
}

}  // namespace mantissa::models
