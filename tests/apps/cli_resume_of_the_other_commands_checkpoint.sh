#!/bin/sh
# A fine-tune's checkpoint records "task": "finetune" with its model (recipes/finetune_record.h):
# `train --resume` refuses it naming the finetune command that continues it, `eval` names the
# model it records, `finetune --resume` refuses a checkpoint of `train` before it loads the
# model, and one of another architecture; all with status 2.
# Usage: cli_resume_of_the_other_commands_checkpoint.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
llama=$(cd "$fx/llama" && pwd -P)
# refused NAME MESSAGE COMMAND...: status 2, MESSAGE in its error, before any training.
refused() {
  name=$1 msg=$2
  shift 2
  "$cli" "$@" >"$name.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit status $rc, expected 2"
  grep -q -F -- "$msg" "$name.txt" || fail "$name: not the expected message '$msg'"
  grep -q '^mantissa finetune:\|^tokenizing\|^step \|^epoch ' "$name.txt" &&
    fail "$name: refused only after the run started"
  return 0
}
ft="finetune --data $fx/qa.jsonl --lora-rank 4 --block-size 32 --threads 1 --no-progress-bar"
gpt="train --model gpt --text $fx/corpus.txt --layers 1 --width 32 --heads 2 --context 16
  --sample-tokens 0 --threads 1 --no-progress-bar"
"$cli" $ft --model-dir "$fx/llama" --max-steps 4 --every-n-train-steps 2 --output-dir ad \
  --checkpoint-dir fck >ft.txt 2>&1 || fail "the fine-tune failed"
half=$(ls fck | grep 'step=2\.safetensors$')
[ -n "$half" ] || fail "no checkpoint at step 2 in fck: $(ls fck)"
"$cli" $gpt --max-steps 2 --checkpoint-dir tck >gpt.txt 2>&1 || fail "the GPT run failed"

refused train_resumes_finetune "[--resume] 'fck/last.safetensors' is a checkpoint of \`mantissa finetune\` (LlamaForCausalLM from '$llama'), which \`mantissa train\` cannot continue: continue it with \`mantissa finetune --model-dir '$llama' --resume 'fck/last.safetensors'\` and that run's other flags, or give a checkpoint of \`mantissa train\`" \
  $gpt --max-steps 4 --resume fck/last.safetensors
refused finetune_resumes_train "[finetune] --resume 'tck/last.safetensors' is a checkpoint of \`mantissa train --model gpt\`, not a fine-tune's: finetune continues only the checkpoints of a \`mantissa finetune\` run (its --checkpoint-dir); give one of those, or continue that run with the command that wrote it" \
  $ft --model-dir "$fx/llama" --max-steps 4 --output-dir ad2 --resume tck/last.safetensors
[ ! -e ad2 ] || fail "the refused fine-tune made its --output-dir"
refused other_architecture "[finetune] --resume 'fck/last.safetensors' continues a fine-tune of a LlamaForCausalLM (--model-dir '$llama'), but --model-dir '$fx/gpt2' holds a GPT2LMHeadModel: give the --model-dir of the run that wrote the checkpoint" \
  $ft --model-dir "$fx/gpt2" --max-steps 4 --output-dir ad3 --resume fck/last.safetensors
refused eval_names_the_model "fck/last.safetensors holds a Hugging Face language model's weights (a checkpoint of \`mantissa finetune\` (LlamaForCausalLM from '$llama')), but eval takes the checkpoints of \`mantissa train\`" \
  eval --checkpoint fck/last.safetensors
# The fine-tune continues its own checkpoint.
"$cli" $ft --model-dir "$fx/llama" --max-steps 4 --output-dir ad4 --resume "fck/$half" >own.txt 2>&1 ||
  fail "the fine-tune did not continue its own checkpoint"
grep -q '^resuming from checkpoint' own.txt || fail "the fine-tune did not resume"
echo "train, finetune and eval take only their own checkpoints, naming the command that does"
