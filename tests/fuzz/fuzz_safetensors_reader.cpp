// libFuzzer target: bytes as a safetensors file, read by every reader of the format
// (load_safetensors, read_safetensors_header, MappedSafetensors and its per-tensor reads).
// A file the format does not allow must end in mantissa::Error; anything else (a crash, a
// sanitizer report, another exception, a leak) is a finding. docs/fuzzing.md runs it.
#include <cstdint>
#include <string>

#include "fuzz_input_file.h"
#include "mantissa/core/error.h"
#include "mantissa/core/tensor.h"
#include "mantissa/io/mapped_safetensors.h"
#include "mantissa/io/safetensors.h"

namespace {

using mantissa::io::MappedSafetensors;

// Every way a caller reads a mapped file's tensors: a copy in the file's dtype, a converted
// copy (float32, the training dtype), a copy into an existing tensor, the raw bytes.
void read_mapped(const MappedSafetensors& file) {
  const std::string* previous = nullptr;
  for (const auto& info : file.tensors()) {
    mantissa::Tensor t = file.read(info.name);
    if (info.dtype.is_floating_point()) {
      mantissa::Tensor f = file.read(info.name, mantissa::kFloat32);
      file.read_into(info.name, f);
    }
    file.read_into(info.name, t);
    (void)file.bytes(info.name);
    if (previous != nullptr) (void)file.same_bytes(*previous, info.name);
    previous = &info.name;
  }
  (void)file.find("missing");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mantissa::fuzz::InputFile input("model.safetensors");
  const std::string& path = input.write(data, size);
  try {
    const auto file = mantissa::io::load_safetensors(path);
    for (const auto& [name, tensor] : file.tensors) (void)tensor.numel();
  } catch (const mantissa::Error&) {
  }
  try {
    (void)mantissa::io::read_safetensors_header(path);
  } catch (const mantissa::Error&) {
  }
  try {
    const MappedSafetensors file(path);
    read_mapped(file);
  } catch (const mantissa::Error&) {
  }
  return 0;
}
