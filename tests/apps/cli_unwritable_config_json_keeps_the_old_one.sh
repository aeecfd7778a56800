#!/bin/sh
# A config.json that cannot be written (here a file size limit, as a full disk) is an error
# and the earlier run's file stays: it was rewritten in place, unchecked, and left empty.
# (--overwrite-output-dir: the directory holds that earlier run's config.json.)
# Usage: cli_unwritable_config_json_keeps_the_old_one.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_cjf &&
  mkdir cli_cjf &&
  echo '{"epochs": 7}' > cli_cjf/config.json &&
  out=$(trap '' XFSZ; ulimit -f 0; "$M" train --epochs 1 --train-subset 256 --no-progress-bar --checkpoint-dir cli_cjf --overwrite-output-dir 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "cli_cjf/config.json' is left as it was" &&
  grep -q '"epochs": 7' cli_cjf/config.json
