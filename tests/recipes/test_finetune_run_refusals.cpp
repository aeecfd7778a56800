// run_finetune (recipes/finetune_run.h) refuses what a new user gets wrong, in the user's words
// and before it costs them anything: a --resume checkpoint or an --adapter directory that is
// not there (before the model loads and the data is tokenized), an --eval-interval below 1, an
// unknown --optimizer or --quant-dtype (labelled [finetune], not [train]), and a --lora-targets
// name that matches no layer (which trained the other targets alone, the named
// layers without adapters).
// The fine-tunes run on the tiny Llama of tests/fixtures/hf/finetune.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mantissa/recipes/finetune_run.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::error_of;
using mantissa::testing::TempDir;

std::string fixture(const std::string& name) { return testing::hf_finetune_fixture(name); }

// A LoRA fine-tune of the tiny Llama on its prompt/completion data, 1 step, its adapter in
// `dir`/out.
void tiny_finetune(TrainOptions& o, FinetuneOptions& f, const TempDir& dir) {
  o.quiet = true;
  o.batch_size = 8;
  o.quant.lora_rank = 4;
  o.quant.lora_alpha = 32;
  f.model_dir = fixture("llama");
  f.data = fixture("qa.jsonl");
  f.output_dir = dir.file("out");
  f.block_size = 32;
  f.max_steps = 1;
}

TEST(FinetuneRunRefusals, AMissingResumeCheckpointBeforeAnythingLoads) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  o.resume = dir.file("ck/last.safetensors");
  f.data = dir.file("no_data.jsonl");  // not read: the refusal comes first
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --resume '" + o.resume +
                "': no such checkpoint; give a checkpoint a fine-tune wrote to its "
                "--checkpoint-dir (such as last.safetensors)");
  EXPECT_FALSE(fs::exists(f.output_dir));
}

TEST(FinetuneRunRefusals, AMissingAdapterDirectoryBeforeAnythingLoads) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  o.quant.lora_rank = 0;
  f.adapter = dir.file("adapter");
  f.data = dir.file("no_data.jsonl");  // not read: the refusal comes first
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --adapter '" + f.adapter +
                "': no such directory (a peft adapter directory holds adapter_config.json and "
                "adapter_model.safetensors)");
  EXPECT_FALSE(fs::exists(f.output_dir));
}

// --eval-interval 0 validated after every step (a user's way to turn validation off, which is
// --limit-val-batches 0); train's --eval-interval refuses it too.
TEST(FinetuneRunRefusals, AnEvalIntervalBelowOne) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  for (const int64_t interval : {0, -3}) {
    f.eval_interval = interval;
    EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
              "[finetune] --eval-interval must be at least 1 (optimizer steps between "
              "validations), got " +
                  std::to_string(interval) + "; --limit-val-batches 0 turns validation off");
  }
  EXPECT_FALSE(fs::exists(f.output_dir));
}

// --eval-interval beside --val-check-interval: the run validated on the second's schedule and
// ignored the first; train refuses the pair, and finetune shares its check.
TEST(FinetuneRunRefusals, AnEvalIntervalBesideValCheckInterval) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  f.eval_interval = 5;
  o.val_check_interval = "0.5";
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --eval-interval and --val-check-interval both set when to validate; "
            "give one of them");
  EXPECT_FALSE(fs::exists(f.output_dir));
}

TEST(FinetuneRunRefusals, AnUnknownOptimizerOrQuantDtypeInFinetunesName) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  o.optimizer = "adamx";
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] unknown --optimizer 'adamx' (did you mean 'adamw'?); valid values are: "
            "adamw, adam, sgd, adamw8bit, adam8bit");
  o.optimizer = "adamw";
  o.precision = "nf4";
  o.quant.quant_dtype = "bfloat16";
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --quant-dtype must be bf16, fp16 or fp32, got 'bfloat16' (did you mean "
            "'bf16'?)");
  EXPECT_FALSE(fs::exists(f.output_dir));
}

TEST(FinetuneRunRefusals, ALoraTargetThatMatchesNoLayer) {
  TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  tiny_finetune(o, f, dir);
  o.quant.lora_targets = {"q_proj", "v_prj", "self_attn.k_proj", "c_attn"};
  EXPECT_EQ(error_of([&] { run_finetune(o, f); }),
            "[finetune] --lora-targets: 'v_prj', 'c_attn' match no layer of --model-dir '" +
                fixture("llama") +
                "' (a LlamaForCausalLM), so no layer would get the adapters they ask for; its "
                "Linear layers are named q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                "down_proj (a target matches a layer's whole name or its last dotted parts, as "
                "peft's target_modules): correct them or leave them out");
  EXPECT_FALSE(fs::exists(f.output_dir));
  // Whole names and last dotted parts both match: the run trains.
  o.quant.lora_targets = {"q_proj", "self_attn.k_proj", "model.layers.1.mlp.down_proj"};
  const TrainMetrics m = run_finetune(o, f);
  EXPECT_EQ(m.steps, 1);
  // q_proj and k_proj of both layers (64 -> 64 and 64 -> 32) and one down_proj (128 -> 64).
  EXPECT_EQ(m.trainable_parameters, 2 * 4 * (64 + 64) + 2 * 4 * (64 + 32) + 4 * (128 + 64));
}

}  // namespace
}  // namespace mantissa::recipes
