#!/bin/sh
# A logger's hparams.yaml records the run's settings (as Lightning's loggers write every saved
# hyperparameter), not only the model's: a short `mantissa finetune` (QLoRA: the quantization,
# LoRA, optimizer, schedule, batch, block, limits, clipping, accumulation, seed and early
# stopping) and a short `mantissa train` (an FP8 recipe's settings, the lr schedule and limits).
# Each file is parsed (every line "key: value", the values JSON scalars) and its values compared
# with the flags given; PyYAML's safe_load reads it too where Python has PyYAML.
# Usage: cli_hparams_yaml_records_the_run.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1

# expect FILE KEY VALUE...: the file's value of each KEY is VALUE (as written: JSON scalars).
expect() {
  file=$1
  shift
  [ -s "$file" ] || fail "$file was not written"
  awk '!/^[A-Za-z_"][^:]*: ./ { bad = 1 } END { exit bad }' "$file" ||
    fail "$file has a line that is not 'key: value'"
  while [ $# -ge 2 ]; do
    got=$(awk -v key="$1" 'index($0, key ": ") == 1 { print substr($0, length(key) + 3) }' "$file")
    [ "$got" = "$2" ] || fail "$file: $1 is '$got', not '$2'"
    shift 2
  done
  if python3 -c 'import yaml' 2>/dev/null; then
    python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert isinstance(d, dict)' \
      "$file" || fail "$file is not YAML that PyYAML reads"
  fi
}

"$cli" finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" --output-dir ft --threads 1 \
  --precision nf4 --quant-dtype fp32 --lora-rank 4 --lora-alpha 8 --lora-dropout 0.05 \
  --lora-targets q_proj,v_proj --optimizer adamw8bit --lr 0.002 --weight-decay 0.05 \
  --warmup-steps 1 --batch-size 2 --block-size 32 --max-steps 4 --eval-interval 2 \
  --accumulate-grad-batches 2 --gradient-clip-val 0.5 --seed 7 --val-fraction 0.2 \
  --early-stopping-monitor val_loss --early-stopping-patience 5 \
  --logger csv --log-dir logs --no-progress-bar >ft.txt 2>&1 || fail "the fine-tune failed"
expect logs/version_0/hparams.yaml task '"finetune"' precision '"nf4"' quant-dtype '"fp32"' \
  lora-rank 4 lora-alpha 8.0 lora-dropout 0.05 lora-targets '"q_proj,v_proj"' \
  optimizer '"adamw8bit"' lr 0.002 weight-decay 0.05 lr-schedule '"warmup-cosine"' \
  warmup-steps 1 batch-size 2 block-size 32 max-steps 4 eval-interval 2 \
  accumulate-grad-batches 2 gradient-clip-val 0.5 gradient-clip-algorithm '"norm"' seed 7 \
  val-fraction 0.2 early-stopping-monitor '"val_loss"' early-stopping-patience 5 \
  data "\"$fx/qa.jsonl\"" model_dir "\"$fx/llama\""

"$cli" train --epochs 1 --train-subset 256 --batch-size 64 --lr 0.01 --lr-schedule cosine \
  --precision transformer-engine --fp8-amax-history-len 16 --fp8-margin 1 --seed 3 \
  --gradient-clip-val 2 --gradient-clip-algorithm value --logger csv --log-dir tlogs \
  --no-progress-bar >train.txt 2>&1 || fail "the train run failed"
expect tlogs/version_0/hparams.yaml model '"mlp"' hidden '"256"' \
  precision '"transformer-engine"' fp8-amax-history-len 16 fp8-margin 1 fp8-format '"HYBRID"' \
  optimizer '"adamw"' lr 0.01 lr-schedule '"cosine"' batch-size 64 epochs 1 seed 3 \
  gradient-clip-val 2.0 gradient-clip-algorithm '"value"'
echo "hparams.yaml records a fine-tune's and a train run's settings"
