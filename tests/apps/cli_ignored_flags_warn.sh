#!/bin/sh
# Flags the run ignores are named with why: another model's (--patch with mlp, --heads with
# cnn) and a disabled feature's (--save-top-k without --checkpoint-dir, --overwrite-output-dir
# without an output it would let the run replace); a run's config.json
# leaves them out, so replaying it warns about nothing.
# Usage: cli_ignored_flags_warn.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_ign &&
  out=$("$M" train --model mlp --patch 4 --train-subset 256 --max-steps 1 --save-top-k 2 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q -- '--patch applies to --model vit only: --model mlp ignores it' &&
  echo "$out" | grep -q -- '--save-top-k has no effect without --checkpoint-dir' &&
  out=$("$M" train --train-subset 256 --max-steps 1 --no-progress-bar --overwrite-output-dir 2>&1) &&
  echo "$out" | grep -q -- '--overwrite-output-dir has no effect without --checkpoint-dir or --metrics-json' &&
  echo '{}' >cli_ign_m.json &&
  out=$("$M" train --train-subset 256 --max-steps 1 --no-progress-bar --metrics-json cli_ign_m.json --overwrite-output-dir 2>&1) &&
  ! echo "$out" | grep -q -- '--overwrite-output-dir has no effect' &&
  out=$("$M" train --model cnn --heads 4 --train-subset 256 --max-steps 1 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q -- '--heads applies to --model gpt only: --model cnn ignores it' &&
  "$M" train --train-subset 256 --max-steps 1 --no-progress-bar --checkpoint-dir cli_ign >/dev/null 2>&1 &&
  ! grep -q '"patch"' cli_ign/config.json &&
  out=$("$M" train --config cli_ign/config.json --checkpoint-dir cli_ign/b 2>&1) &&
  ! echo "$out" | grep -q warning
