#pragma once
// A safetensors file mapped into memory (mmap) and read one tensor at a time: what loading a
// large pretrained model needs, where load_safetensors would hold every tensor at once. The
// header gets every check of read_safetensors_header (mantissa/io/safetensors.h); a tensor is
// copied out of the mapping into a new tensor or an existing one, and the file pages it
// occupied are then released (madvise DONTNEED), so the mapping does not stay resident.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mantissa/io/safetensors.h"

namespace mantissa::io {

class MappedSafetensors {
 public:
  // Validates the header and maps the file read-only. Throws mantissa::Error naming the file.
  explicit MappedSafetensors(const std::string& path);
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;

  const std::string& path() const { return path_; }
  // Names, dtypes and shapes, in the order of their data.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The tensor's entry, or null when the file has none of that name.
  const SafetensorsTensorInfo* find(const std::string& name) const;
  const SafetensorsTensorInfo& at(const std::string& name) const;  // throws naming file and name

  // A new tensor holding `name` in `dtype` (the file's dtype when none is given): one copy out
  // of the mapping, converted on the way when the dtypes differ.
  Tensor read(const std::string& name, std::optional<DType> dtype = std::nullopt) const;
  // Copies `name` into `dst` (a tensor of the same shape, any dtype), converting the dtype. A
  // contiguous CPU destination is filled a chunk at a time (bytes copied directly when the
  // dtypes agree), so neither the mapping nor a conversion holds more than a chunk extra.
  void read_into(const std::string& name, Tensor& dst) const;
  // The tensor's bytes in the mapping (valid while this object lives).
  const std::byte* bytes(const std::string& name) const;
  // Whether two tensors of this file hold the same bytes (same dtype, shape and data).
  bool same_bytes(const std::string& a, const std::string& b) const;

 private:
  // Elements copied per step of read_into.
  static constexpr int64_t kReadChunkElements = int64_t{1} << 16;
  void release(const std::string& name) const;
  void release_range(size_t offset, size_t n) const;

  std::string path_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<size_t> offsets_;  // byte offset of each tensor's data in the file
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

}  // namespace mantissa::io
