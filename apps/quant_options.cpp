#include "quant_options.h"

#include "comma_list.h"

namespace mantissa::app {

void add_quant_options(CLI::App& cmd, recipes::QuantOptions& q, bool training) {
  cmd.add_option("--lora-rank", q.lora_rank,
                 "LoRA adapters of this rank on every (quantized) Linear; 0: none")
      ->capture_default_str();
  cmd.add_option("--lora-alpha", q.lora_alpha, "LoRA alpha (the adapters are scaled by alpha/r)")
      ->capture_default_str();
  if (training) {
    cmd.add_option("--lora-dropout", q.lora_dropout, "Dropout on the LoRA adapters' input")
        ->capture_default_str();
  }
  // Given is what counts, not the value: "--quant-dtype bf16" with 32-true is as much a mistake
  // as "fp16" (recipes::check_quant_flags_apply).
  cmd.add_option("--quant-ignore", q.quant_ignore,
                 "nf4/fp4/int8: comma-separated name prefixes of Linear layers to keep as they are")
      ->check(comma_list(layer_name_items()))
      ->each([&q](const std::string&) { q.quant_ignore_given = true; });
  cmd.add_option("--quant-dtype", q.quant_dtype,
                 "nf4/fp4/int8: compute dtype of the quantized layers (bf16, fp16 or fp32)")
      ->capture_default_str()
      ->each([&q](const std::string&) { q.quant_dtype_given = true; });
  if (training) {
    cmd.add_option("--init-from", q.init_from,
                   "Start from the model weights of this checkpoint (.safetensors), then quantize");
  }
}

}  // namespace mantissa::app
