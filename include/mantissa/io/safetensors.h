#pragma once
// safetensors: the public tensor file format (https://github.com/huggingface/safetensors).
// Layout: 8-byte little-endian header length N, N bytes of JSON header padded with spaces to a
// multiple of 8, then one byte buffer holding every tensor contiguous, row-major, little-endian.
// The header maps each name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the buffer) plus an optional "__metadata__" object of string -> string.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mantissa/core/dtype.h"
#include "mantissa/core/tensor.h"

namespace mantissa::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes `tensors` (in the given order; non-contiguous views are saved contiguous) and
// `metadata`. Atomic: the data goes to "<path>.tmp.<pid>", is fsync'ed and then renamed over
// `path`; on any error the temporary file is removed and an existing `path` is left untouched.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reorders tensors the way the Python safetensors package lays out a file (largest element type
// first in its dtype order F64, F32, BF16, F16, ..., U8, BOOL; then by name), so that
// save_safetensors writes byte-identical files to safetensors.torch.save_file for the same
// tensors and no metadata (used for bitsandbytes-compatible checkpoints).
void sort_like_python_safetensors(NamedTensors& tensors);

struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
};

// Reads and validates a whole file; throws mantissa::Error naming the file and the offending
// field for anything that does not follow the format.
SafetensorsFile load_safetensors(const std::string& path);

// A file's tensor names, dtypes and shapes (in the order of their data) and its metadata,
// without reading the data: the header gets every check load_safetensors makes (the offsets
// must tile the rest of the file), the tensor bytes are not read.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
};
struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader read_safetensors_header(const std::string& path);

// "F32" <-> kFloat32 etc. (F8_E4M3 is e4m3fn). The parser throws listing the valid strings.
std::string_view safetensors_dtype_name(DType dtype);
DType dtype_from_safetensors(std::string_view name);

// Largest header the reader accepts; a bigger length field means a corrupt or hostile file.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100u * 1000u * 1000u;

// Most dimensions a tensor in a file may have; the reader refuses more (naming the tensor, its
// rank and this cap) and the writer refuses to write a file the reader would refuse. Real
// tensors have at most a handful of dimensions and NumPy 2 allows 64 (NPY_MAXDIMS), but the
// format sets no limit: a hostile header of 100,000 ones describes a one-element tensor that
// costs nothing to load and that anything walking its dimensions (printing, a loop per
// dimension, a recursion) pays for, so the cap is checked before any dimension is read.
inline constexpr size_t kSafetensorsMaxRank = 64;

}  // namespace mantissa::io
