#include "train/checkpoint/checkpoint_checksums.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::train {
namespace {

constexpr const char* kWhere = "checkpoint";

std::string crc_hex(const void* data, size_t n) {
  const uLong crc = crc32_z(crc32_z(0L, Z_NULL, 0), static_cast<const Bytef*>(data), n);
  return fmt::format("{:08x}", static_cast<uint32_t>(crc));
}

// A tensor's checksum covers how the header labels it as well as its bytes: "BF16 [4,3] "
// then the bytes as the file stores them (contiguous, in host memory). A dtype relabelled in
// the header (BF16 read as F16) leaves the bytes alone but reads as other numbers.
std::string tensor_crc(const Tensor& t) {
  Tensor host = t.is_cuda() ? t.to(kCPU) : t;
  if (!host.is_contiguous()) host = host.contiguous();
  const std::string layout = fmt::format("{} [{}] ", io::safetensors_dtype_name(host.dtype()),
                                         fmt::join(host.shape(), ","));
  uLong crc =
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(layout.data()), layout.size());
  crc = crc32_z(crc, static_cast<const Bytef*>(host.data_ptr()), host.nbytes());
  return fmt::format("{:08x}", static_cast<uint32_t>(crc));
}

// A top-level field of the trainer metadata as dump_json writes it: a value parsed back from
// that text dumps to the same bytes (numbers print in their shortest exact form).
std::string field_crc(const nlohmann::json& value) {
  const std::string text = io::dump_json(value);
  return crc_hex(text.data(), text.size());
}

// The trainer metadata of `contents`, parsed; null when it has none or it is not an object
// (the restore names that damage itself).
nlohmann::json trainer_fields(const CheckpointContents& contents) {
  const auto it = contents.metadata.find(kCheckpointMetadataKey);
  if (it == contents.metadata.end()) return nullptr;
  nlohmann::json meta = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  return meta.is_object() ? meta : nlohmann::json(nullptr);
}

// "'rng' of the trainer metadata" / "tensor 'model.net.0.weight'".
[[noreturn]] void fail_damaged(const std::string& source, const std::string& what,
                               const std::string& why) {
  fail(kWhere,
       "{}: {} {}: the file is damaged (an exact resume would continue from other state than "
       "the run saved); use an earlier checkpoint",
       source, what, why);
}

// One section ("trainer" or "tensors") of the checksums: every entry of `actual` (name ->
// computed checksum) must be listed with the same checksum, and every listed name must be one.
void compare_section(const nlohmann::json& listed, const std::map<std::string, std::string>& actual,
                     const std::string& source, const std::string& section,
                     const std::function<std::string(const std::string&)>& what) {
  MANTISSA_CHECK(listed.is_object(), kWhere,
                 "{}: the '{}' metadata has no '{}' object; the file is damaged: use an earlier "
                 "checkpoint",
                 source, kChecksumsMetadataKey, section);
  for (const auto& [name, crc] : actual) {
    const auto it = listed.find(name);
    if (it == listed.end())
      fail_damaged(source, what(name),
                   fmt::format("has no checksum in '{}'", kChecksumsMetadataKey));
    if (!it->is_string() || it->get<std::string>() != crc)
      fail_damaged(source, what(name),
                   fmt::format("does not match its checksum (crc32 {} in the file's '{}', {} of "
                               "what it holds)",
                               it->is_string() ? escape_untrusted(it->get<std::string>(), 16)
                                               : std::string("not a string"),
                               kChecksumsMetadataKey, crc));
  }
  for (const auto& [name, crc] : listed.items()) {
    if (!actual.contains(name))
      fail_damaged(
          source, fmt::format("the '{}' metadata", kChecksumsMetadataKey),
          fmt::format("lists {} {}, which the file does not hold", section, quote_untrusted(name)));
  }
}

}  // namespace

std::string checkpoint_checksums(const CheckpointContents& contents) {
  nlohmann::json out = {{"algorithm", "crc32"},
                        {"trainer", nlohmann::json::object()},
                        {"tensors", nlohmann::json::object()}};
  const nlohmann::json meta = trainer_fields(contents);
  if (meta.is_object())
    for (const auto& [key, value] : meta.items()) out["trainer"][key] = field_crc(value);
  for (const auto& [name, t] : contents.tensors) out["tensors"][name] = tensor_crc(t);
  return io::dump_json(out);
}

void verify_checkpoint_checksums(const CheckpointContents& contents, const std::string& source,
                                 const std::function<bool(const std::string&)>& covered) {
  const auto entry = contents.metadata.find(kChecksumsMetadataKey);
  if (entry == contents.metadata.end()) return;
  const std::string what = fmt::format("{}: the '{}' metadata", source, kChecksumsMetadataKey);
  nlohmann::json listed;
  try {
    listed = io::parse_untrusted_json(entry->second, kWhere, what);
  } catch (const Error&) {
    fail(kWhere, "{} is not valid JSON; the file is damaged: use an earlier checkpoint", what);
  }
  MANTISSA_CHECK(listed.is_object() && listed.value("algorithm", nlohmann::json()) == "crc32",
                 kWhere,
                 "{} must be an object with \"algorithm\": \"crc32\"; the file is damaged: use an "
                 "earlier checkpoint",
                 what);
  std::map<std::string, std::string> fields;
  const nlohmann::json meta = trainer_fields(contents);
  if (meta.is_object())
    for (const auto& [key, value] : meta.items()) fields[key] = field_crc(value);
  compare_section(listed.value("trainer", nlohmann::json()), fields, source, "trainer",
                  [](const std::string& key) {
                    return fmt::format("field {} of the '{}' metadata", quote_untrusted(key),
                                       kCheckpointMetadataKey);
                  });
  std::map<std::string, std::string> tensors;
  nlohmann::json listed_tensors = listed.value("tensors", nlohmann::json());
  for (const auto& [name, t] : contents.tensors)
    if (!covered || covered(name)) tensors[name] = tensor_crc(t);
  // Checksums of tensors a caller did not read (eval reads the weights only) are not compared.
  if (covered && listed_tensors.is_object()) {
    for (auto it = listed_tensors.begin(); it != listed_tensors.end();) {
      if (!covered(it.key()))
        it = listed_tensors.erase(it);
      else
        ++it;
    }
  }
  compare_section(listed_tensors, tensors, source, "tensors", [](const std::string& name) {
    return fmt::format("tensor {}", quote_untrusted(name));
  });
}

void warn_if_no_checksums(const std::map<std::string, std::string>& metadata,
                          const std::string& path) {
  if (!metadata.contains(kCheckpointMetadataKey) || metadata.contains(kChecksumsMetadataKey))
    return;
  warn_once(fmt::format(
      "checkpoint {} holds no checksums ('{}'; written before mantissa stored them): damage to "
      "its run state or tensors cannot be detected; it loads as before",
      path, kChecksumsMetadataKey));
}

}  // namespace mantissa::train
