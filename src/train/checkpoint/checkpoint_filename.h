#pragma once
// The file name a ModelCheckpoint writes, from its filename template, as Lightning's
// ModelCheckpoint.format_checkpoint_name does it: "{name}" becomes "name=<value>" and
// "{name:spec}" formats the value with the spec ("{epoch:02d}" -> "epoch=03",
// "{val_loss:.2f}" -> "val_loss=0.43"). The keys are "epoch" and "step" (integers) and the
// metrics logged so far (floats, ".4f" without a spec).
//
// Lightning writes "name=0" for a key it does not know, so a typo in a key ("{val_los}") names
// every file "val_los=0" and nobody notices; here an unknown key is an error naming it and the
// keys there are.
#include <cstdint>
#include <map>
#include <string>

namespace mantissa::train {

// Throws when the template cannot be formatted whatever is logged: a '{' without its '}' (or a
// '}' without its '{'), an empty key, or a spec that fits neither an integer (epoch, step) nor
// a float (a metric). ModelCheckpoint calls it when it is built.
void check_checkpoint_filename(const std::string& filename);

// The name for the current epoch, step and logged metrics (without dirpath or extension).
// Throws naming the key when the template names one that is neither epoch, step nor logged.
std::string format_checkpoint_filename(const std::string& filename, int64_t epoch, int64_t step,
                                       const std::map<std::string, double>& metrics);

// The name of the version-th checkpoint whose formatted name was already taken (version from
// 1): "epoch=0" becomes "epoch=0-v1", "epoch=0-v2", ..., as Lightning's ModelCheckpoint names
// them (so a template without {step}, saved several times in an epoch, keeps every file).
std::string versioned_checkpoint_filename(const std::string& name, int64_t version);

}  // namespace mantissa::train
