#pragma once
// The checksums a Trainer checkpoint file stores of itself, in its safetensors metadata under
// "mantissa.checksums": the CRC-32 (zlib's crc32, as in gzip and PNG) of each top-level field
// of the "mantissa.trainer" metadata JSON (the RNG state, the position, the optimizer,
// scheduler, scaler and callback state: what an exact resume continues from) and of each
// tensor's dtype, shape and bytes ("BF16 [4,3] " then the bytes). A flipped digit in the RNG state
// or a flipped bit in a weight passes every other check and changes the run without a word; the
// checksums name the field or tensor.
//   {"algorithm": "crc32", "trainer": {"epoch": "1c291ca3", ...},
//    "tensors": {"model.net.0.weight": "8f0e5a2b", ...}}
// Files written before mantissa stored checksums load as before, with a warning.
#include <functional>
#include <map>
#include <string>

#include "mantissa/train/checkpoint/checkpoint.h"

namespace mantissa::train {

inline constexpr const char* kChecksumsMetadataKey = "mantissa.checksums";

// The "mantissa.checksums" metadata value for `contents` (its trainer metadata and tensors).
std::string checkpoint_checksums(const CheckpointContents& contents);

// Checks `contents` against its "mantissa.checksums" entry: every trainer metadata field and
// every tensor that `covered` accepts (all when it is null) must have a checksum and match
// it, and every checksum must name one of them. Throws mantissa::Error from "checkpoint"
// naming `source` and the first field or tensor that differs. Does nothing when `contents` has
// no checksums (see warn_if_no_checksums).
void verify_checkpoint_checksums(const CheckpointContents& contents, const std::string& source,
                                 const std::function<bool(const std::string&)>& covered = nullptr);

// The warning for a Trainer checkpoint file without checksums (written before mantissa stored
// them; or its entry removed): its damage cannot be detected. Once per file name.
void warn_if_no_checksums(const std::map<std::string, std::string>& metadata,
                          const std::string& path);

}  // namespace mantissa::train
