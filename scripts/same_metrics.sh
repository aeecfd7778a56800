#!/usr/bin/env bash
# Fixed-step runs whose metrics JSON must not change across a refactor (docs/design.md,
# "Checking a refactoring"): MLP, CNN, ViT and GPT, 20 optimizer steps each, in every precision
# that the model trains in, same seeds, one thread (so reductions are ordered).
#   scripts/same_metrics.sh run BINARY OUTDIR   write OUTDIR/<model>-<precision>.json
#   scripts/same_metrics.sh diff DIR_A DIR_B    compare two such directories, timings dropped
set -euo pipefail
cmd=${1:-}
case "$cmd" in
run)
  bin=$(realpath "$2"); out=$(realpath -m "$3"); mkdir -p "$out"
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  text="$work/corpus.txt"
  python3 -c "
import random; r=random.Random(0); w=['the','cat','sat','on','a','mat','and','dog','ran','far']
print('\n'.join(' '.join(r.choice(w) for _ in range(12)) for _ in range(400)))" >"$text"
  precisions="32-true 64-true 16-mixed bf16-mixed 16-true bf16-true transformer-engine transformer-engine-float16 nf4 nf4-dq fp4 fp4-dq int8 int8-training"
  for model in mlp cnn vit gpt; do
    for p in $precisions; do
      extra=()
      case $p in nf4*|fp4*|int8) extra=(--lora-rank 4) ;; esac
      case $model in
      gpt) args=(--text "$text" --layers 2 --width 64 --heads 4 --context 32 --batch-size 8
                 --eval-interval 10 --limit-val-batches 2 --limit-test-batches 2 --sample-tokens 16) ;;
      *) args=(--train-subset 1024 --batch-size 64 --limit-test-batches 4) ;;
      esac
      rm -f "$out/$model-$p.json"  # a rerun replaces it (mantissa refuses an earlier metrics file)
      (cd "$work" && "$bin" train --model $model --precision $p --max-steps 20 --seed 0 --threads 1 \
         --no-progress-bar "${args[@]}" "${extra[@]}" --metrics-json "$out/$model-$p.json" \
         >"$out/$model-$p.log" 2>&1) || echo "exit $? : $model $p (see $out/$model-$p.log)"
    done
  done ;;
diff)
  python3 - "$2" "$3" <<'PY'
import json, os, re, sys
a, b = sys.argv[1], sys.argv[2]
timing = re.compile(r"seconds|per_second|_time|wall")
def load(p):
    d = json.load(open(p))
    return {k: v for k, v in d.items() if not timing.search(k)}
names = sorted(f for f in os.listdir(a) if f.endswith(".json"))
bad = 0
for n in names:
    if not os.path.exists(os.path.join(b, n)):
        print("missing in", b, ":", n); bad += 1; continue
    x, y = load(os.path.join(a, n)), load(os.path.join(b, n))
    for k in sorted(set(x) | set(y)):
        if x.get(k) != y.get(k):
            print(f"{n}: {k}: {str(x.get(k))[:80]} != {str(y.get(k))[:80]}"); bad += 1
print(f"{len(names)} runs compared, {bad} differences")
sys.exit(1 if bad else 0)
PY
  ;;
*) echo "usage: $0 run BINARY OUTDIR | diff DIR_A DIR_B" >&2; exit 2 ;;
esac
