#pragma once
// The weight files of a Hugging Face model directory: model.safetensors, or the shards that
// model.safetensors.index.json lists ({"weight_map": {tensor: shard file}}), each mapped with
// io::MappedSafetensors, with every tensor name resolved to the file that holds it.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mantissa/io/mapped_safetensors.h"

namespace mantissa::models {

class HfWeights {
 public:
  // Opens the directory's weights. Throws naming the directory or file: no weights file, an
  // index that is not JSON or names a shard outside the directory, a missing shard, a tensor the
  // index puts in a shard that lacks it, a tensor in two files.
  explicit HfWeights(const std::string& model_dir);

  // Every tensor name, in file order (shards in index order).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  // The file holding `name`; throws naming the directory when none does.
  const io::MappedSafetensors& file_of(const std::string& name) const;
  const io::SafetensorsTensorInfo& info(const std::string& name) const;
  // Paths of the files, for messages.
  std::vector<std::string> paths() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<io::MappedSafetensors>> files_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> where_;  // name -> files_ index
};

}  // namespace mantissa::models
