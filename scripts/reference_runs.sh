#!/usr/bin/env bash
# Reference runs for refactorings that must not change behaviour: trains mlp, cnn, vit and gpt
# for a few steps with a fixed seed in each of the four main precisions and writes one metrics
# JSON per run. Run it with the binary before and after a change, then compare the two folders
# with scripts/compare_reference_runs.py: every number except timing and memory must match
# bit for bit.
#
#   scripts/reference_runs.sh <mantissa-binary> <outdir>
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <mantissa-binary> <outdir>" >&2
  exit 2
fi
bin=$(readlink -f "$1")
out=$2
mkdir -p "$out"

# A small fixed text for gpt, written here so the runs need no file outside the repository.
text="$out/gpt_corpus.txt"
for i in $(seq 1 200); do
  echo "the quick brown fox $i jumps over the lazy dog; pack my box with five dozen liquor jugs"
done > "$text"

# Two threads: reductions are deterministic for a fixed thread count.
common=(--seed 7 --threads 2)
for precision in 32-true bf16-mixed 16-mixed bf16-true; do
  for model in mlp cnn vit; do
    echo "== $model $precision"
    "$bin" train --model "$model" --precision "$precision" "${common[@]}" --epochs 1 \
      --train-subset 256 --no-progress-bar --metrics-json "$out/${model}_${precision}.json" \
      > "$out/${model}_${precision}.log" 2>&1
  done
  echo "== gpt $precision"
  "$bin" train --model gpt --precision "$precision" "${common[@]}" --max-steps 3 \
    --text "$text" --eval-interval 3 --sample-tokens 16 \
    --metrics-json "$out/gpt_${precision}.json" > "$out/gpt_${precision}.log" 2>&1
done
echo "wrote $(ls "$out"/*.json | wc -l) metrics files to $out"
