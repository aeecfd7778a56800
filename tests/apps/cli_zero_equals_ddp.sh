#!/bin/sh
# --strategy zero1, zero2 and fsdp (docs/distributed.md, "Sharded strategies") against ddp under
# mpirun -np NP, for the cases given as MODEL:PRECISION:OPTIMIZER[:accum-ckpt|:lora] (MODEL mlp,
# cnn or gpt; accum-ckpt: with --accumulate-grad-batches 2, and for the GPT
# --activation-checkpointing; lora: LoRA adapters of rank 4 on the frozen base, QLoRA under
# nf4/fp4), or "all": the three models under 32-true, bf16-mixed, 16-mixed (AdamW) and 32-true
# AdamW8bit.
# The checkpoints' tensor data (weights, optimizer state, step losses) are compared byte for
# byte: zero1 reduces the gradients as ddp does, so it is equal at any NP; zero2's
# reduce-scatter adds the ranks' float32 gradients, which at NP 2 is the same sum ddp's
# all-reduce makes (a + b) and beyond may be another order: at NP > 2 a zero2 run that is not
# byte for byte equal must end with a step loss within 1e-4 (relative) of ddp's. fsdp computes
# with the all-gathered (exact) weights and reduce-scatters as zero2 does, so the same holds for
# it. Each rank
# holds a part of the optimizer state: the parts add up to ddp's per-rank bytes, each smaller,
# and the metrics give each rank's peak resident set size.
# Usage: cli_zero_equals_ddp.sh MANTISSA MPIEXEC NP CASES...
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
NP=$3
shift 3
cases="$*"
if [ "$cases" = all ]; then
  cases=""
  for model in mlp cnn gpt; do
    cases="$cases $model:32-true:adamw $model:bf16-mixed:adamw $model:16-mixed:adamw"
    cases="$cases $model:32-true:adamw8bit"
  done
fi
cd "$dir" || exit 1

run() { "$MPIEXEC" --oversubscribe --bind-to none -np "$NP" "$M" "$@"; }

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >text.corpus
# The global batch is the same at every NP: 64 images, 8 GPT windows.
mlp="train --train-subset 128 --epochs 1 --batch-size $((64 / NP)) --hidden 64,32 --seed 3"
cnn="train --model cnn --train-subset 64 --epochs 1 --batch-size $((32 / NP)) --seed 3"
gpt="train --model gpt --layers 2 --width 32 --heads 2 --context 16 --sample-tokens 0
  --text text.corpus --max-steps 2 --batch-size $((8 / NP)) --seed 3"

equal=0
bounded=0
for case in $cases; do
  model=${case%%:*}
  rest=${case#*:}
  precision=${rest%%:*}
  optimizer=${rest#*:}
  extra=
  case $optimizer in
  *:accum-ckpt)
    optimizer=${optimizer%:*}
    extra="--accumulate-grad-batches 2"
    [ "$model" = gpt ] && extra="$extra --activation-checkpointing"
    ;;
  *:lora)
    optimizer=${optimizer%:*}
    extra="--lora-rank 4"
    ;;
  esac
  eval "args=\$$model"
  [ -n "$args" ] || fail "unknown model in case $case"
  tag="$model-$precision-$optimizer${extra:+-${case##*:}}"
  for s in ddp zero1 zero2 fsdp; do
    run $args $extra --no-progress-bar --precision "$precision" --optimizer "$optimizer" --strategy $s \
      --checkpoint-dir "ck-$tag-$s" --metrics-json "$tag-$s.json" >"$tag-$s.txt" 2>&1 ||
      fail "$tag under $s failed"
    grep -q "\"strategy\": \"$s\"" "$tag-$s.json" || fail "$tag-$s.json does not name $s"
  done
  tensor_data "ck-$tag-ddp/last.safetensors" >ddp.bin
  [ -s ddp.bin ] || fail "$tag: ddp wrote no checkpoint"
  d=$(json_list "$tag-ddp.json" optimizer_state_bytes_per_rank | sed -n 1p)
  for s in zero1 zero2 fsdp; do
    tensor_data "ck-$tag-$s/last.safetensors" >zero.bin
    if cmp -s ddp.bin zero.bin; then
      equal=$((equal + 1))
    else
      [ "$s" != zero1 ] && [ "$NP" -gt 2 ] || fail "$tag: $s's checkpoint tensors differ from ddp's"
      a=$(json_list "$tag-ddp.json" step_losses | tail -n 1)
      b=$(json_list "$tag-$s.json" step_losses | tail -n 1)
      near "$a" "$b" "$(awk -v a="$a" 'BEGIN { print (a < 0 ? -a : a) * 1e-4 }')" ||
        fail "$tag: $s's last step loss $b is not within 1e-4 of ddp's $a"
      bounded=$((bounded + 1))
    fi
    sum=0
    for z in $(json_list "$tag-$s.json" optimizer_state_bytes_per_rank); do
      [ "$z" -lt "$d" ] || fail "$tag: a $s rank holds $z bytes of optimizer state, ddp's ranks $d"
      sum=$((sum + z))
    done
    [ "$sum" = "$d" ] || fail "$tag: $s's ranks hold $sum bytes together, ddp's ranks $d each"
    [ "$(json_list "$tag-$s.json" peak_rss_bytes_per_rank | wc -l)" = "$NP" ] ||
      fail "$tag: $s's metrics lack peak_rss_bytes_per_rank"
  done
done
[ $((equal + bounded)) -gt 0 ] || fail "no case given"
echo "at $NP ranks: $equal zero1/zero2/fsdp runs byte for byte equal to ddp, $bounded within the bound ($cases)"
