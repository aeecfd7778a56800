#!/bin/sh
# Ctrl-C during `mantissa train --devices 2` ends the job as it ends one process
# (docs/distributed.md, "What is synchronised", Ctrl-C): exit status 130 (143 for a SIGTERM), one interrupt
# line from rank 0 naming the signal the launcher was sent (SIGINT for a Ctrl-C, although mpirun
# hands it to the ranks as SIGTERM), last.safetensors and the metrics JSON written, its
# "interrupted_by" naming that signal too. The signal goes to the
# launcher alone (as `timeout --foreground` sends it) or to its whole process group (as a
# terminal's Ctrl-C does): either way mpirun hears it once, so the ranks finish their step.
# (`setsid` gives the launcher a process group of its own to signal, as a terminal's job has.)
# A job that fails exits 2, as one process does, with each rank's reason and no Open MPI banner.
# Usage: cli_ddp_interrupt.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
run="train --devices 2 --epochs 1000 --train-subset 512 --hidden 32 --no-progress-bar"
# $1: who is signalled (launcher: the launcher alone, as `timeout --foreground` does; group: its
# whole process group, as a terminal's Ctrl-C does), $2: the signal, $3: the status. The signal
# is sent once the ranks train (their second epoch line): sent after a fixed delay it could
# reach a slow machine's ranks before they handle it, and they would end without a word.
interrupt() {
  # The last job's output goes too: the shell truncates it only once the new job has started,
  # and the wait below could meanwhile read its epoch lines and signal the new job before it
  # handles signals (it then died of the default action, with no interrupt line).
  rm -rf "$dir/ckpt" "$dir/m.json" "$dir/out"
  if [ "$1" = group ]; then
    setsid "$cli" $run --checkpoint-dir "$dir/ckpt" --metrics-json "$dir/m.json" \
      >"$dir/out" 2>"$dir/err.$2" &
  else
    "$cli" $run --checkpoint-dir "$dir/ckpt" --metrics-json "$dir/m.json" \
      >"$dir/out" 2>"$dir/err.$2" &
  fi
  pid=$!
  wait_for_line '^epoch 2/' "$dir/out"
  if [ "$1" = group ]; then kill -s "$2" -- "-$pid"; else kill -s "$2" "$pid"; fi
  wait "$pid"
  rc=$?
  [ "$rc" = "$3" ] || fail "$1 $2: exit status $rc, expected $3"
  [ "$(grep -c "mantissa: interrupted by SIG$2 after step [0-9]*; resume with --resume" "$dir/err.$2")" = 1 ] ||
    fail "$1 $2: not one interrupt line naming SIG$2"
  # The launcher announces the signal it hands on, once (rank 0 does not).
  [ "$(grep -c "^mantissa: \(interrupted (SIGINT\|termination requested (SIGTERM\)" "$dir/err.$2")" = 1 ] ||
    fail "$1 $2: not one announcement from the launcher"
  [ -f "$dir/ckpt/last.safetensors" ] || fail "$1 $2: no last.safetensors"
  grep -q '"interrupted_after_step"' "$dir/m.json" || fail "$1 $2: metrics JSON lacks the step"
  grep -q "\"interrupted_by\": \"SIG$2\"" "$dir/m.json" ||
    fail "$1 $2: the metrics JSON does not say interrupted_by SIG$2"
}
interrupt launcher INT 130
interrupt group INT 130
interrupt launcher TERM 143
"$cli" train --devices 2 --epochs 1 --train-subset 64 --resume "$dir/none.safetensors" \
  >"$dir/out" 2>"$dir/err.resume"
rc=$?
[ "$rc" = 2 ] || fail "a failed job: exit status $rc, expected 2"
# It says why in mantissa's words, once per rank, without Open MPI's MPI_ABORT banner.
[ "$(grep -c "rank [01] of 2 failed: \[checkpoint\]" "$dir/err.resume")" = 2 ] ||
  fail "a failed job: not one error line per rank"
! grep -q "MPI_ABORT\|ORTE_ERROR_LOG\|help message" "$dir/err.resume" ||
  fail "a failed job: Open MPI's banner printed: $(cat "$dir/err.resume")"
echo "interrupted jobs exit 130 / 143, a failed one 2 with its reason alone"
