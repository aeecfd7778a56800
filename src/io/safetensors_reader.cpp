// safetensors reader: every field of the header is checked before any tensor is allocated, so a
// corrupt or hostile file yields a mantissa::Error naming the file and the field, never a crash
// or a huge allocation. Names and values from the file are quoted through quote_untrusted /
// json_excerpt (escaped, cut to ~80 bytes): a crafted file must not reach the terminal raw.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host needs byte swaps here");

constexpr const char* kWhere = "load_safetensors";

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// `shown`: the tensor's name as quote_untrusted prints it.
uint64_t as_offset(const std::string& path, const std::string& shown, const nlohmann::json& v) {
  MANTISSA_CHECK(v.is_number_unsigned(), kWhere,
                 "'{}': tensor {}: data_offsets must hold non-negative integers, got {}", path,
                 shown, json_excerpt(v));
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                  uint64_t buffer_size) {
  const std::string shown = quote_untrusted(name);
  MANTISSA_CHECK(v.is_object(), kWhere, "'{}': tensor {}: expected an object, got {}", path, shown,
                 json_excerpt(v));
  Entry e;
  e.name = name;
  MANTISSA_CHECK(v.contains("dtype") && v["dtype"].is_string(), kWhere,
                 "'{}': tensor {}: missing or non-string field 'dtype'", path, shown);
  try {
    e.dtype = dtype_from_safetensors(v["dtype"].get<std::string>());
  } catch (const Error& err) {
    fail(kWhere, "'{}': tensor {}: field 'dtype': {}", path, shown, err.what());
  }

  MANTISSA_CHECK(v.contains("shape") && v["shape"].is_array(), kWhere,
                 "'{}': tensor {}: missing or non-array field 'shape'", path, shown);
  MANTISSA_CHECK(v["shape"].size() <= kSafetensorsMaxRank, kWhere,
                 "'{}': tensor {}: rank {} is above the limit of {} dimensions "
                 "(kSafetensorsMaxRank); the file is damaged or hostile",
                 path, shown, v["shape"].size(), kSafetensorsMaxRank);
  // numel stays bounded by the buffer size (every dim is checked before multiplying), so the
  // product cannot overflow for a file whose offsets are consistent.
  uint64_t numel = 1;
  int64_t extent = 1;  // the product of the dims, zeros counted as 1: the strides must fit int64
  bool strides_overflow = false;
  for (const auto& d : v["shape"]) {
    MANTISSA_CHECK(d.is_number_unsigned(), kWhere,
                   "'{}': tensor {}: field 'shape' must hold non-negative integers, got {}", path,
                   shown, json_excerpt(v["shape"]));
    const uint64_t n = d.get<uint64_t>();
    MANTISSA_CHECK(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), kWhere,
                   "'{}': tensor {}: dimension {} is too large", path, shown, n);
    e.shape.push_back(static_cast<int64_t>(n));
    strides_overflow |=
        __builtin_mul_overflow(extent, std::max<int64_t>(e.shape.back(), 1), &extent);
    const uint64_t cap = buffer_size + 1;  // any count above the buffer size is "too big"
    if (n == 0 || numel == 0)
      numel = 0;
    else
      numel = n > cap / numel ? cap : std::min(numel * n, cap);
  }

  // A zero dim empties the tensor, but [0, 2^62, 2^62] still has strides past int64 (signed
  // overflow building them, or "more elements than an int64 counts" without the file's name).
  // (A non-empty shape that large is "needs more bytes" below.)
  MANTISSA_CHECK(numel != 0 || !strides_overflow, kWhere,
                 "'{}': tensor {}: shape {} is too large (its strides overflow int64)", path, shown,
                 json_excerpt(v["shape"]));

  MANTISSA_CHECK(
      v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
      kWhere, "'{}': tensor {}: field 'data_offsets' must be [begin, end]", path, shown);
  e.begin = as_offset(path, shown, v["data_offsets"][0]);
  e.end = as_offset(path, shown, v["data_offsets"][1]);
  MANTISSA_CHECK(e.begin <= e.end, kWhere,
                 "'{}': tensor {}: data_offsets [{}, {}] has begin after end", path, shown, e.begin,
                 e.end);
  MANTISSA_CHECK(e.end <= buffer_size, kWhere,
                 "'{}': tensor {}: data_offsets [{}, {}] out of range (the data buffer has {} "
                 "bytes)",
                 path, shown, e.begin, e.end, buffer_size);
  const uint64_t expected = numel * e.dtype.itemsize();
  MANTISSA_CHECK(numel <= buffer_size && e.end - e.begin == expected, kWhere,
                 "'{}': tensor {}: shape {} of {} needs {} bytes but data_offsets [{}, {}] "
                 "span {}",
                 path, shown, shape_str(e.shape), safetensors_dtype_name(e.dtype),
                 numel <= buffer_size ? std::to_string(expected) : std::string("more"), e.begin,
                 e.end, e.end - e.begin);
  return e;
}

void read_exact(std::ifstream& in, const std::string& path, void* dst, uint64_t n,
                const char* what) {
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  MANTISSA_CHECK(static_cast<uint64_t>(in.gcount()) == n, kWhere,
                 "'{}': reading {} failed after {} of {} bytes", path, what, in.gcount(), n);
}

// The file opened and its header read and checked, positioned at the start of the data:
// `entries` sorted by offset, tiling the data buffer exactly.
struct Layout {
  std::ifstream in;
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

Layout read_layout(const std::string& path) {
  std::error_code ec;
  MANTISSA_CHECK(!std::filesystem::is_directory(path, ec), kWhere,
                 "'{}' is a directory, not a safetensors file", path);
  // Opening a FIFO blocks until something writes to it (forever, for a stray pipe), and a
  // device reads as an empty or endless file: only regular files hold safetensors.
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  MANTISSA_CHECK(
      !std::filesystem::exists(status) || std::filesystem::is_regular_file(status), kWhere,
      "'{}' is not a regular file (a device, FIFO or socket), not a safetensors file", path);
  Layout layout;
  std::ifstream& in = layout.in;
  in.open(path, std::ios::binary | std::ios::ate);
  MANTISSA_CHECK(in.is_open(), kWhere, "cannot open '{}': {}", path, std::strerror(errno));
  const std::streamoff size_signed = in.tellg();
  MANTISSA_CHECK(size_signed >= 0, kWhere, "cannot read '{}' (is it a directory?)", path);
  const uint64_t file_size = static_cast<uint64_t>(size_signed);
  MANTISSA_CHECK(file_size >= 8, kWhere,
                 "'{}' is {} bytes long, shorter than the 8-byte header length", path, file_size);
  in.seekg(0);

  uint8_t len_bytes[8];
  read_exact(in, path, len_bytes, 8, "the header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len_bytes[i]) << (8 * i);
  MANTISSA_CHECK(header_len <= kSafetensorsMaxHeaderBytes, kWhere,
                 "'{}': header length {} is absurd (limit {} bytes); the file is corrupt", path,
                 header_len, kSafetensorsMaxHeaderBytes);
  MANTISSA_CHECK(header_len <= file_size - 8, kWhere,
                 "'{}': header length {} runs past the end of the {}-byte file", path, header_len,
                 file_size);
  std::string header(header_len, '\0');
  read_exact(in, path, header.data(), header_len, "the header");
  const uint64_t buffer_size = file_size - 8 - header_len;
  // The format pads the header with spaces; JSON allows no raw NUL, and the parser takes one as
  // the end of its input, so "{...}\0<anything>" would pass with whatever follows unread.
  if (const size_t nul = header.find('\0'); nul != std::string::npos) {
    fail(kWhere,
         "'{}': header byte {} (file offset {}) is a NUL byte; the header is JSON padded with "
         "spaces, so the file is damaged",
         path, nul, nul + 8);
  }
  // Before parsing: deep nesting would overflow the stack of whatever walks the parsed value.
  check_json_nesting(header, kWhere, fmt::format("'{}': header", path));

  // Keys are collected while parsing, in every object: nlohmann::json would silently keep only
  // the last of two equal keys. A duplicated tensor name or field is an error.
  std::optional<JsonDuplicateKey> duplicate;
  nlohmann::json j;
  try {
    j = parse_json_noting_duplicate_keys(header, duplicate);
  } catch (const nlohmann::json::exception& e) {
    // The parser's message quotes the token it stopped at, which can be long.
    fail(kWhere, "'{}': header is not valid JSON: {}", path, escape_untrusted(e.what(), 200));
  }
  MANTISSA_CHECK(j.is_object(), kWhere, "'{}': header must be a JSON object, got {}", path,
                 j.type_name());
  MANTISSA_CHECK(!duplicate || !duplicate->path.empty(), kWhere,
                 "'{}': duplicate tensor name {} in the header", path,
                 quote_untrusted(duplicate ? duplicate->key : ""));
  if (duplicate)
    fail(kWhere, "{}", duplicate_key_message(fmt::format("'{}': header", path), *duplicate));

  std::vector<Entry>& entries = layout.entries;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      MANTISSA_CHECK(value.is_object(), kWhere, "'{}': '__metadata__' must be an object, got {}",
                     path, value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        MANTISSA_CHECK(mv.is_string(), kWhere,
                       "'{}': '__metadata__' value of {} must be a string, got {}", path,
                       quote_untrusted(mk), json_excerpt(mv));
        layout.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, key, value, buffer_size));
  }

  // The tensors must tile the buffer exactly: sorted by offset, each starts where the previous
  // ended, and the last ends at the end of the file.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    MANTISSA_CHECK(e.begin >= pos, kWhere,
                   "'{}': data_offsets of {} [{}, {}] overlap those of {} [{}, {}]", path,
                   quote_untrusted(e.name), e.begin, e.end, quote_untrusted(prev ? prev->name : ""),
                   prev ? prev->begin : 0, prev ? prev->end : 0);
    MANTISSA_CHECK(e.begin == pos, kWhere,
                   "'{}': data_offsets do not cover the buffer: bytes [{}, {}) before {} belong "
                   "to no tensor",
                   path, pos, e.begin, quote_untrusted(e.name));
    pos = e.end;
    prev = &e;
  }
  MANTISSA_CHECK(pos == buffer_size, kWhere,
                 "'{}': data_offsets do not cover the buffer: it has {} bytes, the tensors end at "
                 "{}",
                 path, buffer_size, pos);

  return layout;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  Layout layout = read_layout(path);
  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  // Entries are contiguous and in file order, so the data is read in one forward pass.
  for (const Entry& e : layout.entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (t.nbytes() > 0) read_exact(layout.in, path, t.data_ptr(), t.nbytes(), "tensor data");
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  Layout layout = read_layout(path);
  SafetensorsHeader out;
  out.metadata = std::move(layout.metadata);
  for (Entry& e : layout.entries)
    out.tensors.push_back({std::move(e.name), e.dtype, std::move(e.shape)});
  return out;
}

}  // namespace mantissa::io
