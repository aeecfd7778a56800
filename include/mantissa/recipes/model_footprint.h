#pragma once
// A model's size before it is built: its parameter count from the sizes the user gave (the
// MLP's --hidden, the GPT's --layers/--width/--context, a pretrained config.json) and the memory
// it takes to train, checked against the memory the machine has (and --memory-limit) so that an
// absurd size (--layers 100000000) is refused at once with the figures instead of building for
// hours. Counts and bytes are computed with checked arithmetic: a count past int64 saturates at
// its maximum (and is then refused, no machine holds it).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::recipes {

// The parameter counts of the models, exactly what the built model's parameter_count() gives
// (tests/recipes/test_model_footprint.cpp builds them to compare), saturating at INT64_MAX.
int64_t mlp_parameter_count(int64_t in_features, const std::vector<int64_t>& hidden,
                            int64_t num_classes);
int64_t gpt_parameter_count(const models::GPTConfig& c);
int64_t hf_parameter_count(const models::HfConfig& c);

// What a model costs to train per parameter, in bits, at least: its weight, and unless it is
// frozen, its gradient and the optimizer's state. Lower bounds (no activations, master copies,
// quantization scales or LoRA adapters), so a model refused by them cannot fit.
struct ParameterBits {
  int64_t weight = 32;
  int64_t gradient = 32;  // 0: frozen (quantized base weights, evaluation)
  int64_t state = 64;     // optimizer state (Adam: two moments)
  int64_t total() const { return weight + gradient + state; }
};

// The bits of a parameter of dtype `param_dtype` under `precision` (nf4/fp4 weights: 4 bits,
// int8: 8, frozen) trained by `optimizer` (adamw/adam: two moments, in fp32 with
// `fp32_state`; sgd: one momentum; adamw8bit/adam8bit: two 8-bit moments). training false:
// the weights alone (evaluation, generation, a base frozen under LoRA adapters).
ParameterBits parameter_bits(const std::string& precision, DType param_dtype,
                             const std::string& optimizer, bool fp32_state, bool training);

// The bits one rank holds under `strategy` in the MPI job this process belongs to: fsdp over N
// ranks keeps 1/N of the gradients and optimizer state (the weights are built whole on every
// rank before they are sharded); `bits` unchanged otherwise.
ParameterBits per_rank_bits(ParameterBits bits, const std::string& strategy);

struct ModelFootprint {
  int64_t parameters = 0;
  ParameterBits bits;
  std::string precision;  // for the message
  std::string optimizer;  // "" when not training
  // parameters * bits.total() / 8, saturating.
  int64_t bytes() const;
};

// The memory a model may take: the machine's available memory (MemAvailable, and a cgroup's
// limit when lower), and --memory-limit's bytes when given; nullopt for either that is unknown
// or not given.
struct MemoryBound {
  std::optional<int64_t> available;  // the machine's
  std::optional<int64_t> limit;      // --memory-limit
  std::string limit_text;            // the flag's value as given
};

// The machine's available memory now: MemAvailable of /proc/meminfo, or less when the process's
// cgroup (v2) limits it; nullopt when neither can be read.
std::optional<int64_t> available_memory_bytes();

// The bounds of a run: the machine's available memory when the model lives in host memory
// (`host_memory`; a GPU's is not known here), and --memory-limit when given (parsed, throwing
// naming the flag).
MemoryBound memory_bound(const std::string& memory_limit, bool host_memory);

// Throws OutOfMemoryError ("the model has 7.9e+13 parameters, which take at least 1.1 PiB to
// train in 32-true with adamw (weights, gradients and optimizer state, 16 bytes a parameter);
// this machine has 21.3 GiB available") when the footprint exceeds either bound. `what` names
// the model and the flags that size it ("--model gpt (--layers 100000000 --width 256)").
void check_model_fits(const ModelFootprint& f, const MemoryBound& bound, const std::string& what,
                      const std::string& remedy = "Choose smaller sizes");

// Building a model of a GiB or more takes seconds to minutes (initialising its weights): says so
// on stdout first ("mantissa train: building the model: 4.2e+08 parameters, at least 6.2 GiB
// to train in 32-true (Ctrl-C stops at once)"), so a long silence is explained. Nothing for a
// smaller model or when `quiet`.
void announce_large_build(const ModelFootprint& f, const char* command, bool quiet);

// "1.10 PiB", "21.3 GiB", "512 MiB": sizes up to exbibytes.
std::string memory_size_text(int64_t bytes);

}  // namespace mantissa::recipes
