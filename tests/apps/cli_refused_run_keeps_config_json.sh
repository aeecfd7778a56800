#!/bin/sh
# config.json is written when training starts: a run refused before it trains (here a resume
# with another optimizer) leaves the config of the run behind the checkpoints as it was.
# Usage: cli_refused_run_keeps_config_json.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_kcfg &&
  "$M" train --train-subset 256 --max-steps 1 --no-progress-bar --checkpoint-dir cli_kcfg >/dev/null 2>&1 &&
  grep -q '"optimizer": "adamw"' cli_kcfg/config.json &&
  ! "$M" train --train-subset 256 --max-steps 2 --no-progress-bar --checkpoint-dir cli_kcfg --resume last --optimizer sgd >/dev/null 2>&1 &&
  grep -q '"optimizer": "adamw"' cli_kcfg/config.json &&
  ! grep -q resume cli_kcfg/config.json &&
  out=$("$M" train --precision nf4 --fp8-format E4M3 --max-steps 1 2>&1)
echo "$out" | grep -q "applies to the transformer-engine precisions only, not 'nf4'"
