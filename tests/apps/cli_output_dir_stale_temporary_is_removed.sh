#!/bin/sh
# A run killed while it wrote its final model (kill -9, or a second Ctrl-C before the writer
# removed it) left "model.safetensors.tmp.<pid>" in --output-dir, and the rerun was refused:
# "--output-dir ... is not empty: it holds model.safetensors.tmp.1152". The temporary of a
# writer that is gone is no earlier run's output: the rerun removes it, says so, and runs. One
# whose writer is alive (here: this script's shell) is kept, and the directory still refused.
# Usage: cli_output_dir_stale_temporary_is_removed.sh <mantissa binary> <tests/fixtures>
set -u
cli="$1"
F="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
T="--model-dir $F/llama --data $F/qa.jsonl --block-size 32 --batch-size 4 --threads 1 --no-progress-bar"

sh -c 'exit 0' &
dead=$!
wait "$dead"
mkdir "$dir/out"
tmp="$dir/out/model.safetensors.tmp.$dead"
head -c 1000 /dev/zero >"$tmp"   # as kill -9 during the final write leaves it
"$cli" finetune $T --lora-rank 8 --max-steps 1 --output-dir "$dir/out" >"$dir/run.txt" 2>&1 ||
  fail "the rerun into the directory with a dead writer's temporary failed"
grep -q -x -F -- "mantissa: removed '$tmp', left behind by an interrupted write" "$dir/run.txt" ||
  fail "the removal is not said"
[ ! -e "$tmp" ] || fail "the stale temporary is still there"
[ -f "$dir/out/adapter_model.safetensors" ] || fail "the rerun wrote no adapter"

mkdir "$dir/live"
live="$dir/live/model.safetensors.tmp.$$"
head -c 1000 /dev/zero >"$live"
"$cli" finetune $T --lora-rank 8 --max-steps 1 --output-dir "$dir/live" >"$dir/live.txt" 2>&1
[ $? -eq 2 ] || fail "a live writer's temporary: not refused"
grep -q -F -- "is not empty: it holds model.safetensors.tmp.$$" "$dir/live.txt" ||
  fail "a live writer's temporary: not the expected error"
[ -e "$live" ] || fail "a live writer's temporary was removed"
exit 0
