#pragma once
// Casting by hand where a precision plugin already manages dtypes (docs/precision.md, "Do not
// cast by hand"). The Trainer marks every training/validation/test step of a plugin other
// than plain 32-true with a ManagedPrecisionScope; inside it, opening an autocast region,
// casting a parameter (a leaf that requires grad) with Tensor::to, or converting a module with
// Module::to prints a one-time warning naming what was done, where, and the plugin -- the
// plugin's own casts are made outside the mark or inside an InternalCastScope. Lightning's
// docs give the same advice ("don't call .half() or autocast yourself"); a warning, not an
// error, because the result is still computed.
#include <string>

namespace mantissa {

struct ManagedPrecision {
  std::string plugin;  // "MixedPrecision (16-mixed)"
  std::string place;   // "MyModule.training_step"
};

// Marks the current thread's scope as managed by `plugin`; nests, restoring the outer mark.
class ManagedPrecisionScope {
 public:
  ManagedPrecisionScope(std::string plugin, std::string place);
  ~ManagedPrecisionScope();
  ManagedPrecisionScope(const ManagedPrecisionScope&) = delete;
  ManagedPrecisionScope& operator=(const ManagedPrecisionScope&) = delete;

 private:
  const ManagedPrecision* previous_;
  ManagedPrecision current_;
};

// The innermost mark of this thread, or nullptr.
const ManagedPrecision* managed_precision();

// Casts a library op makes as part of its work (autocast's argument casts, a quantized layer
// casting its bias): not by hand, never warned about.
class InternalCastScope {
 public:
  InternalCastScope();
  ~InternalCastScope();
  InternalCastScope(const InternalCastScope&) = delete;
  InternalCastScope& operator=(const InternalCastScope&) = delete;
};
bool in_internal_cast();

// Inside a managed scope and outside internal casts: prints, once per kind of cast per process,
// "mantissa: warning: <what> inside <place>, whose precision plugin <plugin> already manages
// ...". Returns whether a warning was due (printed now or before).
bool warn_if_cast_by_hand(const char* kind, const std::string& what);
// Forgets which kinds have warned (tests).
void reset_cast_by_hand_warnings();

}  // namespace mantissa
