#!/bin/sh
# The ZeRO strategies' checkpoints and shares (docs/distributed.md, "Sharded strategies"),
# under mpirun -np 2: rank 0 puts every rank's part of the optimizer state back together into
# the ordinary checkpoint, so a zero1 checkpoint written after step 2 resumes under zero1, zero2
# and ddp to the bytes of the uninterrupted run (AdamW8bit: tensors split on 8-bit blocks), and
# a resumed rank keeps only its part of the loaded state. On the GPT each zero2 rank holds
# 45-55 % of ddp's optimizer state. (cli.zero_equals_ddp_* compare the runs with ddp.)
# Usage: cli_zero_resume.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

run2() { "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$M" "$@"; }

# per_rank FILE: the metrics JSON's optimizer_state_bytes_per_rank, one a line.
per_rank() { json_list "$1" optimizer_state_bytes_per_rank; }

# Resume: AdamW8bit, 4 steps, a checkpoint after step 2.
args="train --train-subset 256 --epochs 1 --batch-size 32 --hidden 64 --seed 3 --no-progress-bar
  --optimizer adamw8bit"
run2 $args --strategy zero1 --every-n-train-steps 2 --checkpoint-dir whole \
  --metrics-json whole.json >whole.txt 2>&1 || fail "the whole zero1 run failed"
[ -f "whole/epoch=0-step=2.safetensors" ] || fail "no zero1 checkpoint after step 2"
tensor_data whole/last.safetensors >a.bin
for s in zero1 zero2 ddp; do
  run2 $args --strategy $s --resume "whole/epoch=0-step=2.safetensors" --checkpoint-dir "res-$s" \
    --metrics-json "res-$s.json" >"res-$s.txt" 2>&1 || fail "resuming under $s failed"
  tensor_data "res-$s/last.safetensors" >b.bin
  cmp -s a.bin b.bin || fail "the zero1 checkpoint resumed under $s ends elsewhere than the whole run"
done
# Resumed under zero1 or zero2, each rank kept its part of the loaded state only.
for s in zero1 zero2; do
  [ "$(per_rank "res-$s.json")" = "$(per_rank whole.json)" ] ||
    fail "resumed under $s the ranks hold $(per_rank "res-$s.json" | tr '\n' ' ')bytes, the whole run's $(per_rank whole.json | tr '\n' ' ')"
done

# The GPT (many similar tensors, split where a part ends): each rank's state within 45-55 % of
# ddp's.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >text.corpus
gpt="train --model gpt --layers 2 --width 32 --heads 2 --context 16 --sample-tokens 0
  --no-progress-bar --text text.corpus --max-steps 2 --seed 3"
for s in ddp zero2; do
  run2 $gpt --strategy $s --metrics-json "gpt-$s.json" >"gpt-$s.txt" 2>&1 ||
    fail "the GPT under $s failed"
done
d=$(per_rank gpt-ddp.json | sed -n 1p)
for z in $(per_rank gpt-zero2.json); do
  [ $((z * 100)) -ge $((d * 45)) ] && [ $((z * 100)) -le $((d * 55)) ] ||
    fail "GPT: a zero2 rank holds $z bytes of optimizer state, ddp's ranks $d"
done
echo "a zero1 checkpoint resumes exactly under zero1, zero2 and ddp; each GPT rank holds half the state"
