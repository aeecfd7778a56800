#!/usr/bin/env bash
# Validation loss of the reference GPT (6 layers, width 256, context 128, batch 16, the bundled
# corpus; docs/models.md) after 2000 steps under every FP8/FP4 recipe against bf16-mixed, seed 0,
# one thread per run, JOBS runs at a time (docs/fp8.md, "Accuracy of the recipes"). Prints a
# Markdown table of the validation loss every 250 steps and the gap at the last step (goals:
# within 0.05 nats/byte for the FP8 recipes, 0.15 for nvfp4 and mxfp4).
#
#   bench/fp8_recipe_gpt_accuracy.sh [path/to/mantissa]      (default: build/mantissa)
# Environment: STEPS (2000), JOBS (2), RECIPES (every recipe the binary lists), OUT (a fresh
# temporary directory: each run's log and metrics JSON).
set -euo pipefail
M=${1:-build/mantissa}
STEPS=${STEPS:-2000}
JOBS=${JOBS:-2}
. "$(dirname "$0")/fp8_recipe_names.sh"
RECIPES=${RECIPES:-$(fp8_recipe_names "$M" bench/fp8_recipe_gpt_accuracy.sh)}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

run() {  # run NAME ARGS...: one 2000-step run, its log in $OUT/NAME.log
  local name=$1
  shift
  rm -f "$OUT/$name.json"  # a rerun into $OUT replaces its result (mantissa refuses an old one)
  "$M" train --model gpt --max-steps "$STEPS" --eval-interval 250 --threads 1 --seed 0 \
    --no-progress-bar --metrics-json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1 ||
    echo "bench/fp8_recipe_gpt_accuracy.sh: the $name run failed; see $OUT/$name.log" >&2
}

names=(bf16-mixed $RECIPES)
for i in "${!names[@]}"; do
  n=${names[$i]}
  if [ "$n" = bf16-mixed ]; then run "$n" --precision bf16-mixed &
  else run "$n" --precision transformer-engine --fp8-recipe "$n" &
  fi
  (( (i + 1) % JOBS == 0 )) && wait
done
wait

curve() {  # curve NAME: the run's validation losses, one per evaluation during the fit
  sed -n 's/^step [0-9]*\/[0-9]*.*val loss \([0-9.]*\).*/\1/p' "$OUT/$1.log"
}
final() {  # final NAME: the validation loss after the fit
  sed -n 's/^final validation loss: \([0-9.]*\).*/\1/p' "$OUT/$1.log"
}
ref=$(final bf16-mixed)
[ -n "$ref" ] || { echo "bench/fp8_recipe_gpt_accuracy.sh: bf16-mixed printed no validation loss; see $OUT/bf16-mixed.log" >&2; exit 1; }
echo "GPT 6x256, $STEPS steps, seed 0, 1 thread each; CPU: $(lscpu | sed -n 's/^Model name: *//p'); logs in $OUT"
echo
steps=$(sed -n 's/^step \([0-9]*\)\/[0-9]*.*val loss.*/\1/p' "$OUT/bf16-mixed.log" | tr '\n' ' ')
echo "| precision | validation loss (nats/byte) at steps ${steps% } | final | gap to bf16-mixed |"
echo "|---|---|---|---|"
for n in "${names[@]}"; do
  c=$(curve "$n" | tr '\n' ' ')
  last=$(final "$n")
  gap=-
  [ "$n" = bf16-mixed ] || [ -z "$last" ] || gap=$(awk -v a="$last" -v b="$ref" 'BEGIN { printf "%+.4f", a - b }')
  echo "| $n | ${c% } | ${last:-(no result)} | $gap |"
done
