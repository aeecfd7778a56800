#!/bin/sh
# Two builds of mantissa against each other, interleaved: ROUNDS rounds, each running
# `mantissa bench` once per side for the MLP (784-1024-1024-10, batch 256) and a small GPT
# (2x128, batch 8) in eight precisions. Prints per precision the median samples/s of each side,
# the ratio of medians (after/before) and the spread of the per-round ratios. For refactors that
# must not change speed (docs/design.md).
#   bench/before_after.sh BEFORE_BINARY AFTER_BINARY
# Environment: ROUNDS (4), STEPS (30 timed steps per precision and round), THREADS (2).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
before=$(realpath "$1") after=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
yes 'the quick brown fox jumps over the lazy dog' | head -n 3000 >"$work/text.txt"
precisions=32-true,bf16-mixed,16-mixed,bf16-true,transformer-engine,nf4-dq,int8,int8-training
r=1
while [ "$r" -le "${ROUNDS:-4}" ]; do
  for side in before after; do
    if [ "$side" = before ]; then bin=$before; else bin=$after; fi
    for model in mlp gpt; do
      if [ "$model" = gpt ]; then
        shape="--layers 2 --width 128 --text $work/text.txt --batch-size 8"
      else
        shape="--hidden 1024,1024"
      fi
      # shellcheck disable=SC2086
      (cd "$work" && "$bin" bench --model "$model" --precisions "$precisions" \
        --steps "${STEPS:-30}" --rounds 1 --untimed-steps 3 --threads "${THREADS:-2}" $shape \
        --json "$work/$side-$model-$r.json" >/dev/null 2>&1)
    done
  done
  r=$((r + 1))
done
python3 - "$work" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    side, model, _ = os.path.basename(path)[:-5].split("-")
    for row in json.load(open(path))["results"]:
        runs.setdefault((model, row["precision"]), {}).setdefault(side, []).append(
            row["samples_per_second"])
print("| model | precision | before samples/s | after samples/s | after/before | per-round ratios |")
print("|---|---|---:|---:|---:|---|")
for (model, precision), s in sorted(runs.items()):
    b, a = statistics.median(s["before"]), statistics.median(s["after"])
    ratios = sorted(x / y for x, y in zip(s["after"], s["before"]))
    print(f"| {model} | {precision} | {b:.0f} | {a:.0f} | {a / b:.3f} | {ratios[0]:.2f}-{ratios[-1]:.2f} |")
PY
