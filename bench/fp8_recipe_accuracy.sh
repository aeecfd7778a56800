#!/usr/bin/env bash
# Test accuracy of the reference MLP (`mantissa train --model mlp`: 784-256-10, AdamW, batch 256,
# Fashion-MNIST) under every FP8/FP4 recipe against bf16-mixed, over several seeds, one thread
# per run (docs/fp8.md, "Accuracy of the recipes"). Prints a Markdown table: each recipe's
# accuracy per seed, the mean, and the mean's gap to bf16-mixed in points (the goal is within
# 0.5 points for every recipe).
#
#   bench/fp8_recipe_accuracy.sh [path/to/mantissa]      (default: build/mantissa)
# Environment: SEEDS ("0 1 2"), EPOCHS (3), RECIPES (every recipe the binary lists).
set -euo pipefail
M=${1:-build/mantissa}
SEEDS=${SEEDS:-0 1 2}
EPOCHS=${EPOCHS:-3}
. "$(dirname "$0")/fp8_recipe_names.sh"
RECIPES=${RECIPES:-$(fp8_recipe_names "$M" bench/fp8_recipe_accuracy.sh)}

accuracy() {  # accuracy SEED ARGS...: the final test accuracy of one run
  local seed=$1
  shift
  "$M" train --model mlp --epochs "$EPOCHS" --seed "$seed" --threads 1 --no-progress-bar "$@" 2>&1 |
    sed -n 's/^final test accuracy: \([0-9.]*\).*/\1/p'
}

row() {  # row NAME ARGS...: prints "| NAME | acc per seed | mean |" and sets MEAN
  local name=$1
  shift
  local accs=() a
  for s in $SEEDS; do
    a=$(accuracy "$s" "$@")
    [ -n "$a" ] || { echo "bench/fp8_recipe_accuracy.sh: $name seed $s printed no accuracy" >&2; exit 1; }
    accs+=("$a")
  done
  MEAN=$(printf '%s\n' "${accs[@]}" | awk '{ s += $1 } END { printf "%.4f", s / NR }')
  LINE="| $name | ${accs[*]} | $MEAN"
}

echo "MLP 784-256-10, $EPOCHS epochs, seeds $SEEDS, 1 thread each; CPU: $(lscpu | sed -n 's/^Model name: *//p')"
echo
echo "| precision | test accuracy per seed | mean | gap to bf16-mixed (points) |"
echo "|---|---|---|---|"
row bf16-mixed --precision bf16-mixed
ref=$MEAN
echo "$LINE | - |"
for r in $RECIPES; do
  row "$r" --precision transformer-engine --fp8-recipe "$r"
  echo "$LINE | $(awk -v a="$MEAN" -v b="$ref" 'BEGIN { printf "%+.2f", 100 * (a - b) }') |"
done
