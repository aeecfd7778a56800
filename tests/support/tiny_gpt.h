#pragma once
// The smallest GPT the recipe tests train (1 layer, width 32, 2 heads, context 16), on `text`,
// with 2 evaluation batches and no samples: a few steps take well under a second.
#include <string>

#include "mantissa/recipes/gpt_run.h"

namespace mantissa::testing {

inline recipes::GptOptions tiny_gpt(const std::string& text) {
  recipes::GptOptions g;
  g.text = text;
  g.layers = 1;
  g.width = 32;
  g.heads = 2;
  g.context = 16;
  g.warmup_steps = 2;
  g.eval_batches = 2;
  g.sample_tokens = 0;
  return g;
}

}  // namespace mantissa::testing
