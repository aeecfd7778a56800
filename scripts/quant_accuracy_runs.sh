#!/bin/sh
# The accuracy runs of docs/quantization.md ("Accuracy"), one after another on one thread:
#   mlp / cnn from scratch: int8-training vs bf16-mixed (same seed and epochs)
#   mlp: 32-true, then nf4 + LoRA r=8 from its checkpoint
#   gpt: bf16-mixed pretraining on one fortune file, then LoRA r=8 fine-tunes on another
#        (nf4-dq vs bf16-mixed) from the same weights
# Usage: scripts/quant_accuracy_runs.sh [OUT_DIR] [STEP ...]   (steps: mlp cnn nf4 gpt; default all)
# Environment: MANTISSA (the CLI binary, default build/mantissa).
set -eu
M=${MANTISSA:-build/mantissa}
OUT=${1:-quant_accuracy}
[ $# -gt 0 ] && shift
STEPS=${*:-"mlp nf4 gpt cnn"}
mkdir -p "$OUT"
FORTUNES=/usr/share/games/fortunes  # Debian package 'fortunes'

run() {  # name, args...
  name=$1
  shift
  echo "== $name: $M train $*" | tee "$OUT/$name.log"
  rm -f "$OUT/$name.json"  # a rerun replaces its result: mantissa refuses an earlier metrics file
  OMP_WAIT_POLICY=passive "$M" train --threads 1 --seed 0 --no-progress-bar \
    --metrics-json "$OUT/$name.json" "$@" >>"$OUT/$name.log" 2>&1 && rc=0 || rc=$?
  echo "$name rc=$rc" >>"$OUT/done.txt"  # a failed run does not stop the others
}

for step in $STEPS; do
  case $step in
  mlp)
    run mlp_bf16 --model mlp --epochs 2 --precision bf16-mixed
    run mlp_int8t --model mlp --epochs 2 --precision int8-training
    ;;
  cnn)
    run cnn_bf16 --model cnn --epochs 1 --train-subset 10000 --precision bf16-mixed
    run cnn_int8t --model cnn --epochs 1 --train-subset 10000 --precision int8-training
    ;;
  nf4)
    rm -rf "$OUT/mlp_fp32_ckpt"  # a new run: an earlier one's directory would be refused
    run mlp_fp32 --model mlp --epochs 2 --precision 32-true --checkpoint-dir "$OUT/mlp_fp32_ckpt"
    run mlp_nf4_lora --model mlp --epochs 1 --precision nf4 --lora-rank 8 \
      --init-from "$OUT/mlp_fp32_ckpt/last.safetensors"
    ;;
  gpt)
    GPT="--model gpt --layers 2 --width 128 --heads 4 --context 128 --batch-size 16"
    # shellcheck disable=SC2086
    run gpt_pretrain $GPT --precision bf16-mixed --text "$FORTUNES/computers" \
      --max-steps 300 --eval-interval 100 --save-weights "$OUT/gpt_computers.safetensors"
    for p in nf4-dq bf16-mixed; do
      # shellcheck disable=SC2086
      run "gpt_lora_$p" $GPT --precision "$p" --lora-rank 8 \
        --init-from "$OUT/gpt_computers.safetensors" --text "$FORTUNES/songs-poems" \
        --max-steps 150 --warmup-steps 10 --eval-interval 50
    done
    ;;
  *)
    echo "unknown step $step (mlp cnn nf4 gpt)" >&2
    exit 2
    ;;
  esac
done
