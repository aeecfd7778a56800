#!/bin/sh
# --strategy zero1 (docs/distributed.md, "Sharded strategies"): under mpirun -np 2 it trains the
# bits ddp trains. The checkpoints' tensor data (weights, optimizer state, step losses) are
# compared byte for byte: the MLP under 32-true, bf16-mixed, 16-mixed (a GradScaler) and
# AdamW8bit. Each rank holds
# only its shard's optimizer state: the ranks' bytes add up to ddp's per-rank bytes, and on
# the GPT (many similar tensors) each rank holds about half. A zero1 checkpoint written after
# step 2 resumes, under zero1 and under ddp, to the uninterrupted run's bytes.
# Usage: cli_zero1_equals_ddp.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

run2() { "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$M" "$@"; }

# tensor_data FILE: the safetensors file's tensor bytes (after the 8-byte length and the JSON
# header, whose metadata names the strategy).
tensor_data() {
  n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}

# per_rank FILE: the metrics JSON's optimizer_state_bytes_per_rank, one a line.
per_rank() { json_list "$1" optimizer_state_bytes_per_rank; }

mlp="train --train-subset 256 --epochs 1 --batch-size 32 --hidden 64 --seed 3 --no-progress-bar"
for case in "32-true adamw" "bf16-mixed adamw" "16-mixed adamw" "32-true adamw8bit"; do
  set -- $case
  tag="$1-$2"
  for s in ddp zero1; do
    run2 $mlp --precision "$1" --optimizer "$2" --strategy $s --checkpoint-dir "ck-$tag-$s" \
      --metrics-json "$tag-$s.json" >"$tag-$s.txt" 2>&1 || fail "$tag under $s failed"
    grep -q "\"strategy\": \"$s\"" "$tag-$s.json" || fail "$tag-$s.json does not name $s"
  done
  tensor_data "ck-$tag-ddp/last.safetensors" >a.bin
  tensor_data "ck-$tag-zero1/last.safetensors" >b.bin
  [ -s a.bin ] && cmp -s a.bin b.bin || fail "$tag: zero1's checkpoint tensors differ from ddp's"
  d0=$(per_rank "$tag-ddp.json" | sed -n 1p)
  d1=$(per_rank "$tag-ddp.json" | sed -n 2p)
  z0=$(per_rank "$tag-zero1.json" | sed -n 1p)
  z1=$(per_rank "$tag-zero1.json" | sed -n 2p)
  [ "$d0" -gt 0 ] && [ "$d0" = "$d1" ] || fail "$tag: ddp's ranks hold $d0 and $d1 bytes"
  [ $((z0 + z1)) = "$d0" ] || fail "$tag: zero1's shards hold $z0 + $z1 bytes, ddp's ranks $d0 each"
  [ "$z0" -lt "$d0" ] && [ "$z1" -lt "$d0" ] && [ "$z1" -gt 0 ] ||
    fail "$tag: zero1's ranks hold $z0 and $z1 bytes, ddp's $d0"
done

# The GPT: each rank's state within 45-55 % of ddp's.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >text.corpus
gpt="train --model gpt --layers 2 --width 32 --heads 2 --context 16 --sample-tokens 0
  --no-progress-bar --text text.corpus --max-steps 3 --seed 3"
for s in ddp zero1; do
  run2 $gpt --strategy $s --checkpoint-dir "gck-$s" --metrics-json "gpt-$s.json" \
    >"gpt-$s.txt" 2>&1 || fail "the GPT under $s failed"
done
tensor_data gck-ddp/last.safetensors >a.bin
tensor_data gck-zero1/last.safetensors >b.bin
cmp -s a.bin b.bin || fail "GPT: zero1's checkpoint tensors differ from ddp's"
d=$(per_rank gpt-ddp.json | sed -n 1p)
for z in $(per_rank gpt-zero1.json); do
  [ $((z * 100)) -ge $((d * 45)) ] && [ $((z * 100)) -le $((d * 55)) ] ||
    fail "GPT: a zero1 rank holds $z bytes of optimizer state, ddp's ranks $d"
done

# Resume: AdamW8bit, 4 steps, a checkpoint after step 2.
args="$mlp --optimizer adamw8bit"
run2 $args --strategy zero1 --every-n-train-steps 2 --checkpoint-dir whole \
  --metrics-json whole.json >whole.txt 2>&1 || fail "the whole zero1 run failed"
[ -f "whole/epoch=0-step=2.safetensors" ] || fail "no zero1 checkpoint after step 2"
for s in zero1 ddp; do
  run2 $args --strategy $s --resume "whole/epoch=0-step=2.safetensors" --checkpoint-dir "res-$s" \
    --metrics-json "res-$s.json" >"res-$s.txt" 2>&1 || fail "resuming under $s failed"
  tensor_data whole/last.safetensors >a.bin
  tensor_data "res-$s/last.safetensors" >b.bin
  cmp -s a.bin b.bin || fail "the zero1 checkpoint resumed under $s ends elsewhere than the whole run"
done
# Resumed under zero1, each rank dropped the loaded state of the other rank's shard.
[ "$(per_rank res-zero1.json)" = "$(per_rank whole.json)" ] ||
  fail "resumed under zero1 the ranks hold $(per_rank res-zero1.json | tr '\n' ' ')bytes, the whole run's $(per_rank whole.json | tr '\n' ' ')"
echo "zero1 equals ddp byte for byte (MLP 32-true, bf16-mixed, 16-mixed, AdamW8bit; GPT); optimizer state sharded; resumes exactly"
