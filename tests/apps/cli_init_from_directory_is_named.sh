#!/bin/sh
# --init-from naming a directory (the earlier run's --checkpoint-dir) says so and names the
# file meant, with status 2, as --resume does (it said "no such file").
# Usage: cli_init_from_directory_is_named.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_ifd &&
  mkdir cli_ifd &&
  "$M" train --precision nf4 --lora-rank 2 --max-steps 1 --train-subset 64 --no-progress-bar --init-from cli_ifd >cli_ifd.out 2>&1
[ $? -eq 2 ] &&
  grep -q -- '--init-from cli_ifd: is a directory; give a checkpoint such as cli_ifd/last.safetensors' cli_ifd.out
