#!/bin/sh
# The metrics JSON records the FP8 recipe beside the precision ("fp8_recipe": the recipe and
# its settings, as a checkpoint records them, and the --fp8-exclude names), so that runs under
# two recipes, or one recipe with other switches, can be told apart: train and finetune under
# nvfp4 with a switch set, train under delayed scaling with its history length and margin; a
# bf16-mixed run has no "fp8_recipe"; compare's and bench's --json give their FP8 row the recipe
# too. (docs/cli.md "Metrics JSON")
# Usage: cli_metrics_json_records_fp8_recipe.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1

# recipe_is FILE PYTHON-EXPRESSION: the expression over r (the file's "fp8_recipe") and j (the
# whole file) holds.
recipe_is() {
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1])); r = j.get("fp8_recipe")
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$1" "$2" || fail "$1: not $2"
}

T="--model mlp --train-subset 128 --hidden 32 --batch-size 32 --max-steps 2 --seed 0 --threads 1
  --limit-test-batches 1 --no-progress-bar"
"$cli" train $T --precision transformer-engine --fp8-recipe nvfp4 --fp8-disable-rht \
  --metrics-json nvfp4.json >nvfp4.txt 2>&1 || fail "the nvfp4 run failed"
recipe_is nvfp4.json 'list(j)[:2] == ["precision", "fp8_recipe"] and j["precision"] == "transformer-engine"'
recipe_is nvfp4.json 'r == {"recipe": "nvfp4", "disable_rht": True,
  "disable_stochastic_rounding": False, "disable_2d_quantization": False, "exclude": []}'

"$cli" train $T --precision transformer-engine --fp8-amax-history-len 16 --fp8-margin 1 \
  --fp8-exclude net.0 --metrics-json delayed.json >delayed.txt 2>&1 || fail "the delayed run failed"
recipe_is delayed.json 'r["recipe"] == "delayed" and r["fp8_format"] == "HYBRID" and
  r["amax_history_len"] == 16 and r["margin"] == 1 and r["amax_compute_algo"] == "max" and
  r["exclude"] == ["net.0"]'

"$cli" train $T --precision bf16-mixed --metrics-json bf16.json >bf16.txt 2>&1 ||
  fail "the bf16-mixed run failed"
recipe_is bf16.json '"fp8_recipe" not in j'

"$cli" finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" --precision transformer-engine \
  --fp8-recipe nvfp4 --fp8-disable-stochastic-rounding --block-size 32 --batch-size 4 \
  --max-steps 1 --seed 1 --threads 1 --no-progress-bar --output-dir out \
  --metrics-json finetune.json >finetune.txt 2>&1 || fail "the finetune run failed"
recipe_is finetune.json 'r == {"recipe": "nvfp4", "disable_rht": False,
  "disable_stochastic_rounding": True, "disable_2d_quantization": False, "exclude": []}'

S="--precisions bf16-mixed,transformer-engine --fp8-recipe nvfp4 --fp8-disable-2d-quantization
  --hidden 16 --threads 1 --rounds 1 --untimed-steps 1"
"$cli" compare $S --train-subset 64 --epochs 1 --timed-steps 1 --json compare.json \
  >compare.txt 2>&1 || fail "compare failed"
"$cli" bench $S --steps 2 --json bench.json >bench.txt 2>&1 || fail "bench failed"
for f in compare.json bench.json; do
  recipe_is $f '[(x["precision"], x.get("fp8_recipe")) for x in j.get("runs", j.get("results"))]
    == [("bf16-mixed", None), ("transformer-engine", {"recipe": "nvfp4", "disable_rht": False,
    "disable_stochastic_rounding": False, "disable_2d_quantization": True, "exclude": []})]'
done
echo PASS
