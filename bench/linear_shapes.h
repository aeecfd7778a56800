#pragma once
// The Linear layers the layer benchmarks time (bench_fp8_linear, bench_int8_linear,
// bench_linear4bit): a name, the rows of input (tokens) and the features in and out.
#include <cstdint>

namespace mantissa::bench {

struct LinearShape {
  const char* name;
  int64_t tokens, in, out;
};

// The reference MLP's and GPT's layers at their benchmark batches (MLP 784-1024-1024-10 at
// batch 256; GPT 6x256 at 16 x 128 tokens).
inline constexpr LinearShape kModelLinearShapes[] = {
    {"mlp_784x1024_b256", 256, 784, 1024},        {"mlp_1024x1024_b256", 256, 1024, 1024},
    {"gpt_qkv_256x768_t2048", 2048, 256, 768},    {"gpt_fc_256x1024_t2048", 2048, 256, 1024},
    {"gpt_proj_1024x256_t2048", 2048, 1024, 256},
};

}  // namespace mantissa::bench
