#pragma once
// The readers under fuzzing take paths, so each input is written to one file per process
// (under $TMPDIR, /tmp when unset), rewritten for every input and removed at exit.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mantissa::fuzz {

class InputFile {
 public:
  // `name` ends the file's name, e.g. "tokenizer.json", so messages look like real ones.
  explicit InputFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mantissa_fuzz_" +
            std::to_string(::getpid()) + "_" + name;
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's content with `data`; returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot create " + path_);
    const size_t written = size ? std::fwrite(data, 1, size, f) : 0;
    if (std::fclose(f) != 0 || written != size) throw std::runtime_error("cannot write " + path_);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace mantissa::fuzz
