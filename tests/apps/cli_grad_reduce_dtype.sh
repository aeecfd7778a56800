#!/bin/sh
# --grad-reduce-dtype (docs/distributed.md, "Mixed-precision communication") under mpirun -np 2:
# float32 is the default's bytes; bfloat16 trains other weights, the same under ddp, zero1 and
# zero2 (at 2 ranks every strategy adds the same two rounded gradients), within 1e-2 (relative)
# of float32's last step loss; --ddp-bf16-compress is bfloat16 (and contradicting
# --grad-reduce-dtype float32 is refused); other dtypes are refused.
# Usage: cli_grad_reduce_dtype.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

run() { "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$M" "$@"; }

args="train --train-subset 128 --epochs 1 --batch-size 32 --hidden 64 --seed 3 --no-progress-bar"
train() {
  tag=$1
  shift
  run $args --checkpoint-dir "ck-$tag" --metrics-json "$tag.json" "$@" >"$tag.txt" 2>&1 ||
    fail "$tag failed: $(tail -n 3 "$tag.txt")"
  tensor_data "ck-$tag/last.safetensors" >"$tag.bin"
  [ -s "$tag.bin" ] || fail "$tag wrote no checkpoint"
}

train default --strategy ddp
train f32 --strategy ddp --grad-reduce-dtype float32
cmp -s default.bin f32.bin || fail "--grad-reduce-dtype float32 changed the default's weights"
for s in ddp zero1 zero2; do
  train "bf16-$s" --strategy $s --grad-reduce-dtype bfloat16
done
cmp -s f32.bin bf16-ddp.bin && fail "bfloat16 reduction left float32's weights unchanged"
cmp -s bf16-ddp.bin bf16-zero1.bin || fail "zero1's bfloat16 run differs from ddp's"
cmp -s bf16-ddp.bin bf16-zero2.bin || fail "zero2's bfloat16 run differs from ddp's at 2 ranks"
train compress --strategy ddp --ddp-bf16-compress
cmp -s bf16-ddp.bin compress.bin || fail "--ddp-bf16-compress is not --grad-reduce-dtype bfloat16"
a=$(json_list f32.json step_losses | tail -n 1)
b=$(json_list bf16-ddp.json step_losses | tail -n 1)
near "$a" "$b" "$(awk -v a="$a" 'BEGIN { print (a < 0 ? -a : a) * 1e-2 }')" ||
  fail "bfloat16's last step loss $b is not within 1e-2 of float32's $a"

"$M" train --grad-reduce-dtype float16 >bad.txt 2>&1 && fail "--grad-reduce-dtype float16 was accepted"
grep -q "grad-reduce-dtype" bad.txt || fail "the error does not name the flag: $(cat bad.txt)"
run $args --ddp-bf16-compress --grad-reduce-dtype float32 >both.txt 2>&1 &&
  fail "--ddp-bf16-compress with --grad-reduce-dtype float32 was accepted"
grep -q "give one of them" both.txt || fail "the contradiction is not named: $(cat both.txt)"
echo "float32 = default bytes; bfloat16: ddp = zero1 = zero2 bytes, last loss $b vs float32's $a"
