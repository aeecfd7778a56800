#!/bin/sh
# Ctrl-C during `mantissa train` ends the run cleanly (docs/trainer.md, "Stopping a run"):
# exit code 130, a message naming the checkpoint to resume from, last.safetensors and the
# metrics JSON written; then the checkpoint resumes.
# Usage: cli_interrupt.sh <mantissa binary> [train arguments]
# With train arguments (the GPT's), the resume part is left out: its schedule length comes from
# --max-steps, which a resume may not change.
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
run="train --epochs 1000 --train-subset 512 --hidden 32 --no-progress-bar"
[ $# -ge 2 ] && run="$2"
# 1000 epochs take minutes: the signal arrives during training (or, on a very slow machine,
# before the first step, which stops the run at step 0 the same way).
# --foreground: timeout signals the child alone (without it, it also signals its whole process
# group, so the child can see SIGINT twice and take the second as "exit now").
timeout --foreground --preserve-status -s INT 4 "$cli" $run --checkpoint-dir "$dir/ckpt" \
  --metrics-json "$dir/m.json" >"$dir/out" 2>"$dir/err"
rc=$?
[ "$rc" = 130 ] || fail "exit code $rc, expected 130"
grep -q "mantissa: interrupted by SIGINT after step [0-9]*; resume with --resume $dir/ckpt/last.safetensors" \
  "$dir/err" || fail "no interrupt message"
[ -f "$dir/ckpt/last.safetensors" ] || fail "no last.safetensors"
grep -q '"interrupted_by": "SIGINT"' "$dir/m.json" || fail "metrics JSON lacks interrupted_by"
step=$(sed -n 's/.*"interrupted_after_step": *\([0-9][0-9]*\).*/\1/p' "$dir/m.json")
[ -n "$step" ] || fail "metrics JSON lacks interrupted_after_step"
[ $# -ge 2 ] && { echo "interrupted after step $step"; exit 0; }
# Ctrl-C means stop: no final evaluation of the test set (it ran one, 87 s in 64-true on the
# CNN), and the speed counts the epoch the interrupt cut short (it read 0.0).
grep -q '"final_test_accuracy": null' "$dir/m.json" || fail "an interrupted run evaluated the test set"
if [ "$step" -gt 0 ]; then
  sps=$(json_number "$dir/m.json" samples_per_second)
  awk -v v="$sps" 'BEGIN { exit !(v + 0 > 0) }' ||
    fail "samples_per_second is '$sps' after $step steps"
fi
"$cli" $run --resume "$dir/ckpt/last.safetensors" --max-steps $((step + 2)) \
  --metrics-json "$dir/m2.json" >"$dir/out2" 2>"$dir/err2" || fail "resume failed"
grep -q '"interrupted_by"' "$dir/m2.json" && fail "the resumed run says it was interrupted"
echo "interrupted after step $step, resumed to step $((step + 2))"
