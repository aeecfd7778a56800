#!/bin/sh
# fsdp's checkpoints (docs/distributed.md, "How fsdp works"), the MLP with AdamW8bit:
# - 2 ranks under fsdp write, with --sharded-checkpoint, for the checkpoint after step 2 a
#   weights file and one optimizer shard per rank that `mantissa checkpoint consolidate` makes
#   into the bytes a 2-rank zero2 run writes (fsdp's weights and state are zero2's at 2 ranks);
#   the unsharded fsdp checkpoint is those bytes too;
# - that sharded checkpoint resumes under fsdp on 4 ranks (4 x 8 for 2 x 16), whose step losses
#   agree with the uninterrupted run's within 1e-4 (the reduction order differs with the ranks),
#   and in one process (1 x 32) to the bytes of one process resumed from its consolidation;
# - --strategy fsdp without mpirun trains as one process does: the bytes of a plain run.
# Usage: cli_fsdp_checkpoint.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

run() {
  np=$1
  shift
  "$MPIEXEC" --oversubscribe --bind-to none -np "$np" "$M" "$@"
}
args="train --train-subset 128 --epochs 1 --hidden 64,32 --seed 3 --no-progress-bar
  --optimizer adamw8bit --save-top-k -1 --every-n-train-steps 2"
c=epoch=0-step=2.safetensors

run 2 $args --batch-size 16 --strategy fsdp --sharded-checkpoint --checkpoint-dir f2 \
  --metrics-json f2.json >f2.txt 2>&1 || fail "the sharded 2-rank fsdp run failed"
grep -q '"strategy": "fsdp"' f2.json || fail "f2.json does not name fsdp"
run 2 $args --batch-size 16 --strategy fsdp --checkpoint-dir u2 >u2.txt 2>&1 ||
  fail "the 2-rank fsdp run failed"
run 2 $args --batch-size 16 --strategy zero2 --checkpoint-dir z2 >z2.txt 2>&1 ||
  fail "the 2-rank zero2 run failed"
ls -d "f2/$c".shards-* >/dev/null 2>&1 || fail "no shard directory beside f2/$c"
"$M" checkpoint consolidate "f2/$c" whole2.safetensors >cons.txt 2>&1 || fail "consolidate failed"
tensor_data whole2.safetensors >a.bin
tensor_data "z2/$c" >b.bin
cmp -s a.bin b.bin || fail "the consolidated fsdp checkpoint's tensors differ from zero2's"
tensor_data "u2/$c" >a.bin
cmp -s a.bin b.bin || fail "the unsharded fsdp checkpoint's tensors differ from zero2's"

# 2 -> 4 ranks under fsdp.
run 4 $args --batch-size 8 --strategy fsdp --resume "f2/$c" --checkpoint-dir f4 \
  --metrics-json f4.json >f4.txt 2>&1 || fail "resuming on 4 ranks failed"
json_list f2.json step_losses >l2.txt
json_list f4.json step_losses >l4.txt
[ "$(wc -l <l4.txt)" = 4 ] || fail "the 4-rank resume has $(wc -l <l4.txt) step losses, expected 4"
paste l4.txt l2.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4) exit 1 }' ||
  fail "4 ranks resumed: step losses $(tr '\n' ' ' <l4.txt)differ from the 2-rank run's $(tr '\n' ' ' <l2.txt)"

# 2 ranks -> 1 process.
"$M" $args --batch-size 32 --resume "f2/$c" --checkpoint-dir s1 >s1.txt 2>&1 ||
  fail "resuming the sharded fsdp checkpoint in one process failed"
"$M" $args --batch-size 32 --resume whole2.safetensors --checkpoint-dir w1 >w1.txt 2>&1 ||
  fail "resuming the consolidated file in one process failed"
tensor_data s1/last.safetensors >a.bin
tensor_data w1/last.safetensors >b.bin
cmp -s a.bin b.bin || fail "one process resumed from the sharded fsdp checkpoint ends elsewhere than from its consolidation"

# One process: fsdp is a plain run.
"$M" $args --batch-size 32 --strategy fsdp --checkpoint-dir p1 >p1.txt 2>&1 ||
  fail "--strategy fsdp in one process failed"
"$M" $args --batch-size 32 --checkpoint-dir q1 >q1.txt 2>&1 || fail "the plain run failed"
tensor_data p1/last.safetensors >a.bin
tensor_data q1/last.safetensors >b.bin
cmp -s a.bin b.bin || fail "--strategy fsdp in one process ends elsewhere than a plain run"
echo "fsdp checkpoints: consolidated = zero2's bytes, 2 -> 4 ranks and 2 -> 1 process resume"
