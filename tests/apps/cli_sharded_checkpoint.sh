#!/bin/sh
# Sharded checkpoints (docs/distributed.md, "Sharded checkpoints"), AdamW8bit under zero2:
# - 4 ranks write, for the checkpoint after step 2, the weights file (no optimizer tensors)
#   and a directory with index.json and one optimizer shard per rank; `mantissa checkpoint
#   consolidate` makes of it what a 4-rank zero2 run without --sharded-checkpoint writes (the
#   same tensor bytes; the same optimizer, RNG, position, scheduler and scaler metadata), also
#   when named by its shard directory or the --checkpoint-dir; without its shard directory, or
#   with a shard missing, it is refused naming what is missing;
# - it resumes on 2 ranks (global batch kept: 2 x 16 for 4 x 8) to the bytes of a 2-rank
#   resume from the consolidated file, and that run's sharded checkpoint after step 4 resumes
#   in one process (1 x 32) to the bytes of one process resumed from its consolidation; each
#   continued run's step losses agree with the uninterrupted 4-rank run's (the reduction order
#   of the gradients differs with the number of ranks), and eval reads a sharded checkpoint;
# - rank 1 killed (test hook MANTISSA_TEST_FAULT) after writing its part of the save of
#   last.safetensors after step 2: the job fails, and last.safetensors is still the one of
#   step 1, whole: it evaluates and resumes.
# Usage: cli_sharded_checkpoint.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

run() {
  np=$1
  shift
  "$MPIEXEC" --oversubscribe --bind-to none -np "$np" "$M" "$@"
}
# header FILE: the JSON header.
header() {
  n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  head -c $((8 + n)) "$1" | tail -c "$n"
}
losses() { json_list "$1" step_losses; }
# state_sums FILE: the checksums (mantissa.checksums) of the trainer metadata's fields a resume
# continues from: the optimizers' state, the RNG, the position, the schedulers and the scaler
# (the module's and callbacks' state hold times and paths, which differ between any two runs).
state_sums() {
  header "$1" | tr ',{}' '\n\n\n' |
    grep -E '^\\"(optimizers|rng|epoch|global_step|batches_in_epoch|lr_schedulers|precision_plugin|precision)\\":\\"[0-9a-f]{8}\\"$' |
    sort
}

base="train --train-subset 192 --epochs 1 --hidden 64 --seed 3 --no-progress-bar
  --optimizer adamw8bit --save-top-k -1"
args="$base --every-n-train-steps 2"

# The uninterrupted 4-rank runs, with and without sharded checkpoints (in directories of the
# same name: the checkpoints record their paths).
mkdir unsharded
run 4 $args --batch-size 8 --strategy zero2 --sharded-checkpoint --checkpoint-dir s4 \
  --metrics-json s4.json >s4.txt 2>&1 || fail "the sharded 4-rank run failed"
(cd unsharded && run 4 $args --batch-size 8 --strategy zero2 --checkpoint-dir s4) >w4.txt 2>&1 ||
  fail "the 4-rank run failed"
c=s4/epoch=0-step=2.safetensors
[ -f "$c" ] || fail "no checkpoint after step 2"
header "$c" | grep -q '"optimizer\.' && fail "the weights file holds optimizer tensors"
shards=$(ls -d "$c".shards-*) || fail "no shard directory beside $c"
[ "$(echo "$shards" | wc -l)" = 1 ] || fail "several shard directories for one checkpoint"
for r in 0 1 2 3; do
  [ -f "$shards/optimizer-$r-of-4.safetensors" ] || fail "no shard of rank $r"
done
grep -q '"world_size":4' "$shards/index.json" || fail "the index does not say 4 ranks"
[ "$(ls -d s4/last.safetensors.shards-* | wc -l)" = 1 ] ||
  fail "last.safetensors kept the shard directories of its earlier saves"

"$M" checkpoint consolidate "$c" whole2.safetensors >cons.txt 2>&1 || fail "consolidate failed"
tensor_data whole2.safetensors >a.bin
tensor_data unsharded/s4/epoch=0-step=2.safetensors >b.bin
cmp -s a.bin b.bin ||
  fail "the consolidated checkpoint's tensors differ from those a run without sharding writes"
state_sums whole2.safetensors >h1.txt
state_sums unsharded/s4/epoch=0-step=2.safetensors >h2.txt
[ "$(wc -l <h1.txt)" = 8 ] || fail "the consolidated checkpoint lacks checksums of its state"
cmp -s h1.txt h2.txt || fail "the consolidated checkpoint's state differs from that a run without sharding writes"

# Its shard directory, or the --checkpoint-dir (for last.safetensors), name it as well.
"$M" checkpoint consolidate "$shards/" whole2-dir.safetensors >/dev/null 2>&1 ||
  fail "consolidating the shard directory failed"
cmp -s whole2.safetensors whole2-dir.safetensors || fail "the shard directory consolidates otherwise"
"$M" checkpoint consolidate s4 last-dir.safetensors >/dev/null 2>&1 ||
  fail "consolidating the checkpoint directory failed"
"$M" checkpoint consolidate s4/last.safetensors last.safetensors >/dev/null 2>&1 ||
  fail "consolidating last.safetensors failed"
cmp -s last-dir.safetensors last.safetensors || fail "the checkpoint directory is not its last.safetensors"

# The weights file without its shard directory, or with a shard missing, is refused by name.
mkdir lone
cp "$c" lone/
"$M" eval --checkpoint "lone/epoch=0-step=2.safetensors" >lone.txt 2>&1 &&
  fail "a sharded checkpoint without its shard directory was read"
grep -q 'which is missing: copy that directory along with the file' lone.txt ||
  fail "no message naming the missing shard directory"
cp -r "$shards" lone/
rm "lone/$(basename "$shards")/optimizer-3-of-4.safetensors"
"$M" checkpoint consolidate "lone/epoch=0-step=2.safetensors" x.safetensors >lone.txt 2>&1 &&
  fail "a sharded checkpoint without rank 3's part was consolidated"
grep -q "rank 3's part of the optimizer state, .* is missing" lone.txt ||
  fail "no message naming rank 3's missing part"

# 4 -> 2 ranks, from the sharded file and from its consolidation.
run 2 $args --batch-size 16 --strategy zero1 --sharded-checkpoint --resume "$c" \
  --checkpoint-dir s2 --metrics-json s2.json >s2.txt 2>&1 || fail "resuming on 2 ranks failed"
run 2 $args --batch-size 16 --strategy ddp --resume whole2.safetensors --checkpoint-dir w2 \
  --metrics-json w2.json >w2.txt 2>&1 || fail "resuming the consolidated file on 2 ranks failed"
"$M" checkpoint consolidate s2/last.safetensors s2-last.safetensors >/dev/null 2>&1 ||
  fail "consolidating the 2-rank run's last checkpoint failed"
tensor_data s2-last.safetensors >a.bin
tensor_data w2/last.safetensors >b.bin
cmp -s a.bin b.bin || fail "2 ranks resumed from the sharded checkpoint end elsewhere than from its consolidation"

# 2 ranks -> 1 process.
c2=s2/epoch=0-step=4.safetensors
[ -f "$c2" ] || fail "no 2-rank checkpoint after step 4"
"$M" checkpoint consolidate "$c2" whole4.safetensors >/dev/null 2>&1 || fail "consolidate failed"
"$M" $args --batch-size 32 --resume "$c2" --checkpoint-dir s1 --metrics-json s1.json \
  >s1.txt 2>&1 || fail "resuming in one process failed"
"$M" $args --batch-size 32 --resume whole4.safetensors --checkpoint-dir w1 >w1.txt 2>&1 ||
  fail "resuming the consolidated file in one process failed"
tensor_data s1/last.safetensors >a.bin
tensor_data w1/last.safetensors >b.bin
cmp -s a.bin b.bin || fail "one process resumed from the sharded checkpoint ends elsewhere than from its consolidation"

# The continued runs' step losses against the uninterrupted 4-rank run's.
losses s4.json >l4.txt
for f in s2 s1; do
  losses $f.json >l.txt
  [ "$(wc -l <l.txt)" = 6 ] || fail "$f: $(wc -l <l.txt) step losses, expected 6"
  paste l.txt l4.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4) exit 1 }' ||
    fail "$f: step losses $(tr '\n' ' ' <l.txt)differ from the 4-rank run's $(tr '\n' ' ' <l4.txt)"
done
"$M" eval --checkpoint "$c2" >eval.txt 2>&1 || fail "eval of a sharded checkpoint failed"
grep -q 'test accuracy' eval.txt || fail "eval printed no accuracy"

# A rank killed during a save: saves 1-2 are step 1's (top-k file, last), 3-4 step 2's.
MANTISSA_TEST_FAULT=kill:1:sharded_save:4 run 2 $base --batch-size 16 --strategy zero1 \
  --sharded-checkpoint --every-n-train-steps 1 --checkpoint-dir k >k.txt 2>&1 &&
  fail "the job with a killed rank succeeded"
grep -q 'MANTISSA_TEST_FAULT: rank 1 kills itself at sharded_save 4' k.txt || fail "rank 1 was not killed"
"$M" eval --checkpoint k/last.safetensors >keval.txt 2>&1 || fail "last.safetensors does not load after the kill"
header k/last.safetensors | grep -q 'global_step\\":1,' || fail "last.safetensors is not step 1's"
run 2 $base --batch-size 16 --strategy zero1 --sharded-checkpoint --resume k/last.safetensors \
  --checkpoint-dir k2 >k2.txt 2>&1 || fail "resuming from the last whole checkpoint failed"
echo "sharded checkpoints consolidate to the unsharded state, refuse missing parts, re-shard 4 -> 2 -> 1 exactly, survive a killed rank"
