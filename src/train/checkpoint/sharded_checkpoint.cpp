#include "train/checkpoint/sharded_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/train/trainer.h"
#include "train/checkpoint/checkpoint_checksums.h"
#include "train/fault_injection.h"
#include "train/optimizer_shard.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
constexpr const char* kWhere = "checkpoint";
constexpr const char* kShardMetadataKey = "mantissa.optimizer_shard";
constexpr const char* kIndexName = "index.json";
constexpr const char* kIndexFormat = "mantissa-optimizer-shards";
constexpr int kIndexVersion = 1;
constexpr int64_t kMaxWorld = 1 << 20;
constexpr uintmax_t kMaxIndexBytes = 64 << 20;

std::string shard_file_name(int rank, int world) {
  return fmt::format("optimizer-{}-of-{}.safetensors", rank, world);
}

// The prefix of FILE's shard directories' names.
std::string shard_dir_prefix(const fs::path& file) { return file.filename().string() + ".shards-"; }

// A file name from the index or the metadata: one plain name inside the directory.
bool plain_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    MANTISSA_CHECK(out.good(), kWhere, "could not write {}", quote_untrusted(tmp.string(), 4096));
  }
  fs::rename(tmp, path);
}

// Removes FILE's shard directories other than `keep` (those of earlier saves of FILE, and any
// a killed save left behind). Best effort: a directory that cannot be removed stays.
void remove_other_shard_dirs(const fs::path& file, const std::string& keep) {
  const fs::path parent = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  const std::string prefix = shard_dir_prefix(file);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name != keep && entry.is_directory(ec))
      fs::remove_all(entry.path(), ec);
  }
}

nlohmann::json trainer_metadata(const CheckpointContents& c, const std::string& source) {
  const auto it = c.metadata.find(kCheckpointMetadataKey);
  MANTISSA_CHECK(it != c.metadata.end(), kWhere,
                 "{}: no '{}' entry in the file's __metadata__: not a mantissa checkpoint", source,
                 kCheckpointMetadataKey);
  const nlohmann::json meta = io::parse_untrusted_json(
      it->second, kWhere, fmt::format("{}: the '{}' metadata", source, kCheckpointMetadataKey));
  MANTISSA_CHECK(meta.is_object() && meta.contains("optimizers") && meta["optimizers"].is_array() &&
                     meta.contains("global_step") && meta["global_step"].is_number_integer(),
                 kWhere, "{}: the '{}' metadata lacks its optimizers or global_step", source,
                 kCheckpointMetadataKey);
  return meta;
}

int64_t int_field(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                  const std::string& source) {
  MANTISSA_CHECK(j.is_object() && j.contains(key) && j[key].is_number_integer() &&
                     j[key].get<int64_t>() >= lo && j[key].get<int64_t>() <= hi,
                 kWhere, "{}: field '{}' must be an integer from {} to {}", source, key, lo, hi);
  return j[key].get<int64_t>();
}

std::vector<int64_t> int_list(const nlohmann::json& j, const std::string& source,
                              const char* what) {
  MANTISSA_CHECK(j.is_array(), kWhere, "{}: {} must be a list of integers", source, what);
  std::vector<int64_t> out;
  for (const auto& v : j) {
    MANTISSA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, kWhere,
                   "{}: {} must be a list of integers >= 0", source, what);
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

void save_sharded_checkpoint(Trainer& trainer, const std::string& path,
                             const std::vector<OptimizerStateShard>& shards) {
  Strategy& strategy = trainer.strategy();
  const int rank = strategy.rank();
  const int world = strategy.world_size();
  const fs::path file(path);
  const fs::path parent = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  // A new directory for every save: the one FILE names now stays whole until FILE is replaced.
  std::string name;
  if (rank == 0) {
    std::random_device random;
    name = fmt::format("{}{:08x}", shard_dir_prefix(file), static_cast<uint32_t>(random()));
  }
  name = strategy.first_message_over_ranks(name, nullptr);  // rank 0's
  const fs::path dir = parent / name;
  std::string error;
  try {
    fs::create_directories(dir);
    CheckpointContents mine;
    nlohmann::json meta = {{"rank", rank},
                           {"world_size", world},
                           {"global_step", trainer.global_step()},
                           {"optimizers", nlohmann::json::array()}};
    for (size_t i = 0; i < shards.size(); ++i) {
      meta["optimizers"].push_back({{"state", shards[i].state.meta.at("state")}});
      for (const auto& [key, t] : shards[i].state.tensors)
        mine.tensors.emplace_back(fmt::format("optimizer.{}.{}", i, key), t.contiguous());
    }
    mine.metadata[kShardMetadataKey] = io::dump_json(meta);
    save_checkpoint_file((dir / shard_file_name(rank, world)).string(), mine);
  } catch (const Error& e) {
    error = e.what();
  } catch (const fs::filesystem_error& e) {
    error = e.what();
  }
  detail::fault_point("sharded_save", rank);
  // Every rank's part is written (or one failed) before FILE may name the directory.
  int failed_rank = 0;
  error = strategy.first_message_over_ranks(error, &failed_rank);
  if (!error.empty()) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    fail(kWhere, "rank {} could not write its part of the optimizer state into {}: {}", failed_rank,
         quote_untrusted(dir.string(), 4096), error);
  }
  if (rank != 0) return;
  nlohmann::json index = {{"format", kIndexFormat},
                          {"version", kIndexVersion},
                          {"world_size", world},
                          {"global_step", trainer.global_step()},
                          {"files", nlohmann::json::array()},
                          {"optimizers", nlohmann::json::array()}};
  for (int r = 0; r < world; ++r) index["files"].push_back(shard_file_name(r, world));
  std::vector<optim::OptimizerState> wholes;
  for (const OptimizerStateShard& s : shards) {
    index["optimizers"].push_back({{"cuts", s.cuts}, {"shapes", s.shapes}});
    wholes.push_back({{}, s.whole_meta});
  }
  write_text_atomically(dir / kIndexName, io::dump_json(index));
  CheckpointContents weights = collect_checkpoint(trainer, wholes);
  weights.metadata[kOptimizerShardsMetadataKey] = name;
  save_checkpoint_file(path, weights);  // the commit: FILE names the new directory
  remove_other_shard_dirs(file, name);
}

void assemble_sharded_checkpoint(CheckpointContents& contents, const std::string& path) {
  const auto named = contents.metadata.find(kOptimizerShardsMetadataKey);
  if (named == contents.metadata.end()) return;
  const std::string name = named->second;
  const std::string source = quote_untrusted(path, 4096);
  MANTISSA_CHECK(plain_name(name), kWhere,
                 "{}: its shard directory {} is not a plain name in its directory: the file is "
                 "damaged",
                 source, quote_untrusted(name));
  // The file as written, before its optimizer metadata is completed below.
  verify_checkpoint_checksums(contents, path);
  nlohmann::json meta = trainer_metadata(contents, source);
  const fs::path parent =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  const fs::path dir = parent / name;
  const std::string dir_text = quote_untrusted(dir.string(), 4096);
  MANTISSA_CHECK(fs::is_directory(dir), kWhere,
                 "{} is a sharded checkpoint whose optimizer state is in the directory {}, which "
                 "is missing: copy that directory along with the file (or consolidate it first: "
                 "mantissa checkpoint consolidate)",
                 source, dir_text);
  const fs::path index_path = dir / kIndexName;
  const std::string index_text_name = quote_untrusted(index_path.string(), 4096);
  std::error_code ec;
  const uintmax_t index_bytes = fs::file_size(index_path, ec);
  MANTISSA_CHECK(!ec && index_bytes <= kMaxIndexBytes, kWhere, "{}: {} is missing or too large",
                 source, index_text_name);
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json index = io::parse_untrusted_json(text.str(), kWhere, index_text_name);
  MANTISSA_CHECK(index.is_object() && index.contains("format") && index["format"].is_string() &&
                     index["format"].get<std::string>() == kIndexFormat,
                 kWhere, "{}: not an index of optimizer shards (format '{}' expected)",
                 index_text_name, kIndexFormat);
  MANTISSA_CHECK(int_field(index, "version", 1, 1 << 20, index_text_name) == kIndexVersion, kWhere,
                 "{}: version {} is not supported (this build reads {})", index_text_name,
                 index["version"].get<int64_t>(), kIndexVersion);
  const int world = static_cast<int>(int_field(index, "world_size", 1, kMaxWorld, index_text_name));
  const int64_t step = meta["global_step"].get<int64_t>();
  MANTISSA_CHECK(int_field(index, "global_step", 0, INT64_MAX, index_text_name) == step, kWhere,
                 "{}: written at step {}, but {} at step {}: the directory belongs to another "
                 "checkpoint",
                 index_text_name, index["global_step"].get<int64_t>(), source, step);
  const nlohmann::json& optimizers =
      index.contains("optimizers") ? index["optimizers"] : nlohmann::json();
  MANTISSA_CHECK(optimizers.is_array() && optimizers.size() == meta["optimizers"].size(), kWhere,
                 "{}: it describes {} optimizer(s), {} holds {}", index_text_name,
                 optimizers.is_array() ? optimizers.size() : 0, source, meta["optimizers"].size());
  const nlohmann::json& files = index.contains("files") ? index["files"] : nlohmann::json();
  MANTISSA_CHECK(files.is_array() && files.size() == static_cast<size_t>(world), kWhere,
                 "{}: 'files' must list one file per rank ({})", index_text_name, world);
  // Each rank's shard state, per optimizer.
  const size_t count = optimizers.size();
  std::vector<std::vector<optim::OptimizerState>> parts(count,
                                                        std::vector<optim::OptimizerState>(world));
  for (int r = 0; r < world; ++r) {
    const nlohmann::json& f = files[static_cast<size_t>(r)];
    MANTISSA_CHECK(f.is_string() && plain_name(f.get<std::string>()), kWhere,
                   "{}: file {} of the index is not a plain file name", index_text_name, r);
    const fs::path shard_path = dir / f.get<std::string>();
    const std::string shard_name = quote_untrusted(shard_path.string(), 4096);
    MANTISSA_CHECK(fs::is_regular_file(shard_path), kWhere,
                   "{}: rank {}'s part of the optimizer state, {}, is missing", source, r,
                   shard_name);
    io::SafetensorsFile shard = io::load_safetensors(shard_path.string());
    CheckpointContents shard_contents{std::move(shard.tensors), std::move(shard.metadata)};
    MANTISSA_CHECK(shard_contents.metadata.contains(kChecksumsMetadataKey), kWhere,
                   "{}: no checksums: not a shard mantissa wrote", shard_name);
    verify_checkpoint_checksums(shard_contents, shard_path.string());
    const auto m = shard_contents.metadata.find(kShardMetadataKey);
    MANTISSA_CHECK(m != shard_contents.metadata.end(), kWhere,
                   "{}: no '{}' metadata: not a shard of optimizer state", shard_name,
                   kShardMetadataKey);
    const nlohmann::json sm = io::parse_untrusted_json(m->second, kWhere, shard_name);
    MANTISSA_CHECK(int_field(sm, "rank", 0, kMaxWorld, shard_name) == r &&
                       int_field(sm, "world_size", 1, kMaxWorld, shard_name) == world &&
                       int_field(sm, "global_step", 0, INT64_MAX, shard_name) == step,
                   kWhere,
                   "{}: holds rank {} of {} at step {}, the index expects rank {} of {} at step "
                   "{}",
                   shard_name, sm["rank"].get<int64_t>(), sm["world_size"].get<int64_t>(),
                   sm["global_step"].get<int64_t>(), r, world, step);
    MANTISSA_CHECK(sm.contains("optimizers") && sm["optimizers"].is_array() &&
                       sm["optimizers"].size() == count,
                   kWhere, "{}: holds the state of another number of optimizers than {} ({})",
                   shard_name, index_text_name, count);
    for (size_t i = 0; i < count; ++i) {
      const nlohmann::json& o = sm["optimizers"][i];
      MANTISSA_CHECK(o.is_object() && o.contains("state") && o["state"].is_object(), kWhere,
                     "{}: optimizer {} has no state object", shard_name, i);
      parts[i][static_cast<size_t>(r)].meta = {{"state", o["state"]}};
    }
    for (auto& [key, t] : shard_contents.tensors) {
      size_t i = 0;
      size_t used = 0;
      const bool ok = key.rfind("optimizer.", 0) == 0 &&
                      std::sscanf(key.c_str() + 10, "%zu.%zn", &i, &used) >= 1 && used > 0 &&
                      i < count;
      MANTISSA_CHECK(ok, kWhere, "{}: unexpected tensor {} (expected optimizer.<i>.<key>)",
                     shard_name, quote_untrusted(key));
      parts[i][static_cast<size_t>(r)].tensors[key.substr(10 + used)] = t;
    }
  }
  // The whole states, where an ordinary checkpoint holds them: tensors before the step losses,
  // each optimizer's "state" in its metadata.
  std::vector<std::pair<std::string, Tensor>> optimizer_tensors;
  for (size_t i = 0; i < count; ++i) {
    const nlohmann::json& o = optimizers[i];
    MANTISSA_CHECK(
        o.is_object() && o.contains("cuts") && o.contains("shapes") && o["shapes"].is_array(),
        kWhere, "{}: optimizer {} lacks its cuts or shapes", index_text_name, i);
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& s : o["shapes"]) shapes.push_back(int_list(s, index_text_name, "a shape"));
    try {
      const optim::OptimizerState whole = detail::assemble_optimizer_state(
          meta["optimizers"][i], shapes, int_list(o["cuts"], index_text_name, "cuts"), parts[i]);
      meta["optimizers"][i] = whole.meta;
      for (const auto& [key, t] : whole.tensors)
        optimizer_tensors.emplace_back(fmt::format("optimizer.{}.{}", i, key), t);
    } catch (const Error& e) {
      fail(kWhere, "{}: the ranks' optimizer state in {} does not fit together: {}", source,
           dir_text, e.what());
    }
  }
  auto at = contents.tensors.begin();
  while (at != contents.tensors.end() && at->first.rfind("model.", 0) == 0) ++at;
  contents.tensors.insert(at, optimizer_tensors.begin(), optimizer_tensors.end());
  contents.metadata.erase(kOptimizerShardsMetadataKey);
  contents.metadata[kCheckpointMetadataKey] = io::dump_json(meta);
  contents.metadata[kChecksumsMetadataKey] = checkpoint_checksums(contents);
}

void remove_checkpoint_file(const std::string& path) {
  std::filesystem::remove(path);
  remove_other_shard_dirs(fs::path(path), "");
}

void consolidate_checkpoint(const std::string& in, const std::string& out) {
  save_checkpoint_file(out, load_checkpoint_file(in));
}

}  // namespace mantissa::train
