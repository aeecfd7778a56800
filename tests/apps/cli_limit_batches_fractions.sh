#!/bin/sh
# Batch limits given as fractions that leave no batch (docs/cli.md, "Batch limits"). A fraction
# of a loader smaller than one batch was quietly raised to one batch; it is now Lightning's error
# ("You requested to check 0.05 of the test dataloader but 0.05 * 10 < 1 ... Try at least
# --limit-test-batches=0.1"), naming the flag, before anything trains.
# Usage: cli_limit_batches_fractions.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

# refused NAME MESSAGE FLAGS...: `mantissa FLAGS` exits 2 and says MESSAGE; nothing trained.
refused() {
  name=$1
  message=$2
  shift 2
  (cd "$dir" && "$cli" "$@" >"$dir/$name.txt" 2>&1)
  status=$?
  [ $status -eq 2 ] || fail "$name: exit status $status, expected 2"
  grep -qF -- "$message" "$dir/$name.txt" || fail "$name: no '$message'"
  ! grep -q '^epoch ' "$dir/$name.txt" || fail "$name: it trained before refusing"
  echo "$name: refused"
}
refused train_frac "0.001 of the train dataloader but 0.001 * 2 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-train-batches 0.001
grep -qF -- "--limit-train-batches=0.5" "$dir/train_frac.txt" || fail "train_frac: no suggestion"
refused val_frac "You requested to check 0.05 of the val dataloader but 0.05 * 10 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-val-batches 0.05
grep -qF -- "Try at least --limit-val-batches=0.1" "$dir/val_frac.txt" || fail "val_frac: no suggestion"
# The final evaluation's limit is checked before training too, not after it.
refused test_frac "0.05 of the test dataloader but 0.05 * 10 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-test-batches 0.05

exit 0
