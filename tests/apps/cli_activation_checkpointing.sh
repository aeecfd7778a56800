#!/bin/sh
# `mantissa train --model gpt --activation-checkpointing` (docs/cli.md): the same losses, bit for
# bit, as without it, in bf16-mixed and in QLoRA (nf4-dq + LoRA + 8-bit AdamW), with a smaller
# peak; the metrics JSON and the banner say it; plan and bench take it; transformer-engine gives
# the same metrics (FP8 statistics included) and weights under delayed scaling (the default
# history and one of 2 rows), nvfp4 and mxfp4 with the transform, a checkpointed delayed run
# resumed mid-run writes the weights of the whole run, and mxfp4 with stochastic rounding is
# refused with the reason; the image models ignore it.
# Usage: cli_activation_checkpointing.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
awk 'BEGIN { for (i = 1; i <= 600; i++) print "the quick brown fox jumps over the lazy dog " i }' >"$dir/corpus.text"
gpt="--model gpt --layers 3 --width 64 --heads 4 --context 64 --batch-size 8 --max-steps 4 \
  --eval-interval 2 --sample-tokens 0 --text $dir/corpus.text --threads 1 --no-progress-bar"

for mode in "bf16-mixed" "nf4-dq --lora-rank 4 --optimizer adamw8bit"; do
  tag=$(echo "$mode" | cut -d' ' -f1)
  "$cli" train $gpt --precision $mode --metrics-json "$dir/plain-$tag.json" >"$dir/plain-$tag.txt" 2>&1 ||
    fail "$tag without checkpointing failed: $(cat "$dir/plain-$tag.txt")"
  "$cli" train $gpt --precision $mode --activation-checkpointing \
    --metrics-json "$dir/ckpt-$tag.json" >"$dir/ckpt-$tag.txt" 2>&1 ||
    fail "$tag with checkpointing failed: $(cat "$dir/ckpt-$tag.txt")"
  grep -q 'parameters, activation checkpointing), precision' "$dir/ckpt-$tag.txt" ||
    fail "$tag: the banner does not say activation checkpointing"
  python3 - "$dir/plain-$tag.json" "$dir/ckpt-$tag.json" <<'PY' || fail "$tag: metrics differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert "activation_checkpointing" not in a and b["activation_checkpointing"] is True
for key in ("val_loss_nats_per_char", "final_train_loss", "val_loss_curve", "step_losses"):
    assert key in a, key
    assert a[key] == b[key], (key, a[key], b[key])
assert b["peak_training_memory_bytes"] < a["peak_training_memory_bytes"], \
    (a["peak_training_memory_bytes"], b["peak_training_memory_bytes"])
PY
done

# transformer-engine: every recipe's replay is exact, delayed scaling's (whose replay casts with
# the first forward's scales) with the default history and with one that rolls over within the
# run, nvfp4 with its stochastic rounding and transform, mxfp4 with the transform: the same
# metrics, FP8 statistics (amaxes, scales, cast counts) included, and the same weights.
for r in "delayed" "delayed --fp8-amax-history-len 2" "nvfp4" "mxfp4 --fp8-enable-rht"; do
  tag=$(echo "$r" | tr -d ' -')
  for ck in "" "--activation-checkpointing"; do
    "$cli" train $gpt --precision transformer-engine --fp8-recipe $r $ck \
      --save-weights "$dir/te-$tag$ck.safetensors" \
      --metrics-json "$dir/te-$tag$ck.json" >"$dir/te-$tag$ck.txt" 2>&1 ||
      fail "transformer-engine $r $ck failed: $(cat "$dir/te-$tag$ck.txt")"
  done
  python3 - "$dir/te-$tag.json" "$dir/te-$tag--activation-checkpointing.json" <<'PY' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for key in ("val_loss_nats_per_char", "final_train_loss", "val_loss_curve", "step_losses", "fp8"):
    assert key in a, key
    assert a[key] == b[key], (key, a[key], b[key])
PY
    fail "transformer-engine $r: checkpointing changed the metrics"
  cmp -s "$dir/te-$tag.safetensors" "$dir/te-$tag--activation-checkpointing.safetensors" ||
    fail "transformer-engine $r: checkpointing changed the weights"
done
# A checkpointed delayed run stopped at step 2 and resumed writes the whole run's weights.
"$cli" train $gpt --precision transformer-engine --fp8-amax-history-len 2 \
  --activation-checkpointing --checkpoint-dir "$dir/ck-delayed" --every-n-train-steps 2 \
  >"$dir/ck-delayed.txt" 2>&1 || fail "the checkpointed delayed run failed: $(cat "$dir/ck-delayed.txt")"
"$cli" train $gpt --precision transformer-engine --fp8-amax-history-len 2 \
  --activation-checkpointing --resume "$dir/ck-delayed/epoch=0-step=2.safetensors" \
  --checkpoint-dir "$dir/ck-delayed-resumed" --save-weights "$dir/te-delayed-resumed.safetensors" \
  >"$dir/resumed.txt" 2>&1 || fail "the resumed delayed run failed: $(cat "$dir/resumed.txt")"
cmp -s "$dir/te-delayedfp8amaxhistorylen2.safetensors" "$dir/te-delayed-resumed.safetensors" ||
  fail "delayed: the resumed checkpointed run's weights differ from the whole run's"
out=$("$cli" train $gpt --precision transformer-engine --fp8-recipe mxfp4 \
  --fp8-enable-stochastic-rounding --activation-checkpointing 2>&1)
[ $? -eq 2 ] || fail "transformer-engine (mxfp4, stochastic rounding) with checkpointing: exit status not 2"
echo "$out" | grep -q -- '--activation-checkpointing cannot be combined with --precision transformer-engine under --fp8-recipe mxfp4: mxfp4.s stochastic rounding draws' ||
  fail "transformer-engine: no reason given: $out"

out=$("$cli" train --model mlp --hidden 16 --train-subset 256 --epochs 1 --threads 1 \
  --no-progress-bar --activation-checkpointing 2>&1) || fail "mlp with the flag failed: $out"
echo "$out" | grep -q -- 'warning: --activation-checkpointing applies to --model gpt only' ||
  fail "mlp: the flag is not named as ignored: $out"

out=$("$cli" plan --model mlp --memory 64MiB --activation-checkpointing 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q -- '--activation-checkpointing applies to --model gpt only' ||
  fail "plan --model mlp took the flag: $out"
"$cli" bench --model gpt --layers 2 --width 32 --heads 2 --context 32 --batch-size 4 \
  --precisions bf16-mixed --steps 2 --untimed-steps 1 --threads 1 --text "$dir/corpus.text" \
  --activation-checkpointing --json "$dir/bench.json" >"$dir/bench.txt" 2>&1 ||
  fail "bench with the flag failed: $(cat "$dir/bench.txt")"
grep -q '"activation_checkpointing": true' "$dir/bench.json" || fail "bench JSON lacks the flag"
grep -q 'context 32, activation checkpointing' "$dir/bench.txt" || fail "bench does not say it"
out=$("$cli" bench --model gpt --precisions bf16-mixed,transformer-engine --fp8-recipe mxfp4 \
  --fp8-enable-stochastic-rounding --activation-checkpointing 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q 'cannot be combined with --precision transformer-engine under --fp8-recipe mxfp4' ||
  fail "bench took transformer-engine with checkpointing: $out"
echo "activation checkpointing: same losses, smaller peak, flags checked"
exit 0
