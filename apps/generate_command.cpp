#include "generate_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "mantissa/recipes/generate_run.h"
#include "non_negative.h"
#include "threads_option.h"

namespace mantissa::app {

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<recipes::GenerateRunOptions>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("generate",
                                     "Continue a prompt with a Hugging Face "
                                     "model directory (docs/pretrained.md)");
  cmd->fallthrough();
  cmd->add_option("--model-dir", o->model_dir, "Hugging Face model directory")->required();
  cmd->add_option("--adapter", o->adapter, "A peft LoRA adapter directory to apply");
  cmd->add_option("--prompt", o->prompt, "The text to continue")->required();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "0: greedy; above 0: sampling")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", o->top_p, "Sample among the most likely tokens reaching p")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the sampling")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "32-true, bf16-true, nf4, nf4-dq, fp4, fp4-dq or int8 "
                  "(quantized at load)")
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  cmd->add_flag("--no-prompt", *quiet, "Print only the generated text, not the prompt first");
  cmd->callback([o, quiet, threads_opt] {
    check_threads_option(threads_opt, o->threads, "generate");
    bool started = false;
    const recipes::GenerateResult r = recipes::run_generate(*o, [&](std::string_view piece) {
      if (!started && !*quiet) fmt::print("{}", o->prompt);
      started = true;
      fmt::print("{}", piece);
      std::fflush(stdout);
    });
    if (!started && !*quiet) fmt::print("{}", o->prompt);
    fmt::print("\n");
    std::fflush(stdout);  // the text before the speed line when both go to one file
    fmt::print(stderr, "{} tokens in {:.2f} s ({:.1f} tokens/s)\n", r.new_ids.size(), r.seconds,
               r.seconds > 0 ? static_cast<double>(r.new_ids.size()) / r.seconds : 0.0);
  });
}

}  // namespace mantissa::app
